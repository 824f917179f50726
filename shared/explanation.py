"""Why a run waits: the pending explanation, exactly the shape of the guide's JSON example."""

import heapq
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


SAMPLE = 10
"""Machines named per reason in a grouped explanation: a small cluster's are all named."""
CLOSEST = 5
"""Closest machines named in a grouped explanation."""


class ReasonCount(WireModel):
    """One reason of a grouped explanation: how many machines in one state give it, and the
    first few."""

    reason: str
    state: MachineState
    filter: str | None = None
    code: str | None = None
    room: bool = False
    """The machines fall short only on room (cores, memory or GPUs other runs hold)."""
    count: int = Field(ge=0)
    machines: list[str] = Field(
        default_factory=list, description="the first few, in the explanation's order (by name)"
    )


class GroupedExplanation(WireModel):
    """A pending explanation grouped by reason (`explain=grouped`): counts and a few names per
    reason instead of every machine, so its size does not grow with the cluster."""

    checked_nodes: int = Field(ge=0)
    ready_nodes: int = Field(ge=0)
    down_nodes: int = Field(ge=0)
    closest: str | None = None
    closest_machines: list[str] = Field(
        default_factory=list,
        description="`closest` first, then other machines short only on room, by name (a few)",
    )
    reasons: list[ReasonCount] = Field(
        default_factory=list, description="the most machines first, then by reason"
    )
    evaluated_at: datetime

    @field_serializer("evaluated_at")
    def _iso(self, value: datetime) -> str:
        return value.isoformat()


def grouped(
    explanation: PendingExplanation, rejections: list[RejectionGroup] | None = None
) -> GroupedExplanation:
    """`explanation` grouped by reason, in one pass over its machines; `rejections` (the data
    behind the texts) add each group's filter, code and room flag."""
    kinds = {name: group for group in rejections or () for name in group.machines}
    counts: dict[tuple[str, MachineState], tuple[int, list[str], RejectionGroup | None]] = {}
    for node in explanation.nodes:
        key = ("; ".join(node.reasons), node.state)
        count, names, kind = counts.get(key, (0, [], kinds.get(node.name)))
        if len(names) < SAMPLE:
            names.append(node.name)
        counts[key] = (count + 1, names, kind)
    reasons = [
        ReasonCount(
            reason=text,
            state=state,
            filter=kind.filter if kind else None,
            code=kind.code if kind else None,
            room=kind.room if kind else False,
            count=count,
            machines=names,
        )
        for (text, state), (count, names, kind) in counts.items()
    ]
    reasons.sort(key=lambda group: (-group.count, group.reason, group.state))
    return GroupedExplanation(
        checked_nodes=explanation.checked_nodes,
        ready_nodes=explanation.ready_nodes,
        down_nodes=explanation.down_nodes,
        closest=explanation.closest,
        closest_machines=_closest_machines(explanation.closest, rejections or []),
        reasons=reasons,
        evaluated_at=explanation.evaluated_at,
    )


def _closest_machines(closest: str | None, rejections: list[RejectionGroup]) -> list[str]:
    if closest is None:
        return []
    room = (name for group in rejections if group.room for name in group.machines)
    return [closest, *heapq.nsmallest(CLOSEST - 1, (name for name in room if name != closest))]
