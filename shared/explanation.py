"""Why a run waits: the pending explanation, exactly the shape of the guide's JSON example."""

from datetime import datetime
from enum import StrEnum

from pydantic import Field, field_serializer

from .base import WireModel


class MachineState(StrEnum):
    UP = "Up"
    DOWN = "Down"


class NodeReasons(WireModel):
    """One machine and what keeps it out."""

    name: str
    state: MachineState
    reasons: list[str] = Field(default_factory=list)


class RejectionGroup(WireModel):
    """Machines kept out for the same kind of reason, as data: which filter, the reason's stable
    `code` within it, and whether it is about room (it may clear by itself). The texts stay in
    the explanation's `nodes`; this says what they are, so no reader parses them."""

    filter: str
    code: str
    room: bool
    machines: list[str] = Field(default_factory=list)


class PendingExplanation(WireModel):
    """`.placement` of a waiting task: how many machines were checked and what keeps each out."""

    checked_nodes: int = Field(ge=0)
    ready_nodes: int = Field(ge=0)
    down_nodes: int = Field(ge=0)
    closest: str | None = None
    nodes: list[NodeReasons] = Field(default_factory=list)
    evaluated_at: datetime

    @field_serializer("evaluated_at")
    def _iso(self, value: datetime) -> str:
        # The guide writes "+00:00", not pydantic's default "Z".
        return value.isoformat()
