"""Runs and tasks: what a user submits and what the coordinator keeps about it."""

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import (
    Field,
    StrictInt,
    StringConstraints,
    ValidationInfo,
    field_serializer,
    field_validator,
)

from .ask import RequestedResources
from .base import NUL_PROBLEM, DnsLabel, ProcessText, UserModel, WireModel
from .explanation import GroupedExplanation, PendingExplanation, RejectionGroup
from .image import OciImage
from .reasons import ReasonKind

RunName = DnsLabel

MAX_PRIORITY = 1_000_000
MAX_RETRIES = 10
"""The most times a run may be placed again after a fault (`retries`)."""
USER_PORT_VARIABLES = ("MASTER_PORT", "PET_MASTER_PORT")
"""Variables of a run's `env` that set its rendezvous port instead of the one Astraeus gives."""


class RunState(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"

    @property
    def ended(self) -> bool:
        return self in (RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED)


class TaskState(StrEnum):
    PENDING = "Pending"
    ASSIGNED = "Assigned"
    STARTING = "Starting"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"
    LOST = "Lost"

    @property
    def ended(self) -> bool:
        return self in (TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED, TaskState.LOST)

    @property
    def holds_resources(self) -> bool:
        return self in (TaskState.ASSIGNED, TaskState.STARTING, TaskState.RUNNING)


class RunSpec(UserModel):
    """What a user submits."""

    name: RunName
    workspace: str | None = Field(
        default=None, description="defaults to the token's workspace", max_length=63
    )
    image: OciImage | None = Field(default=None, min_length=1, max_length=1024)
    command: list[Annotated[ProcessText, StringConstraints(max_length=65_536)]] = Field(
        min_length=1, max_length=4096
    )
    env: dict[
        Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")], ProcessText
    ] = Field(default_factory=dict, max_length=4096)
    priority: int = Field(default=0, ge=-MAX_PRIORITY, le=MAX_PRIORITY)
    time_limit_seconds: int | None = Field(default=None, ge=1, le=365 * 24 * 3600)
    requested_resources: RequestedResources = Field(default_factory=RequestedResources)
    retries: StrictInt = Field(
        default=0,
        ge=0,
        le=MAX_RETRIES,
        description="times the run is placed again, from the start, when a worker ends because"
        " its GPU faulted or its machine was Lost (and, with `retry_on_failure`, when it exits"
        " non-zero)",
    )
    retry_on_failure: bool = Field(
        default=False,
        description="retry also when a worker exits non-zero by itself; a cancelled run or a"
        " worker ending 0 is never retried",
    )
    preemptible: bool = Field(
        default=True,
        description="false: never stopped to make room for a higher-priority run (preemption)",
    )

    @field_validator("requested_resources", mode="before")
    @classmethod
    def _no_nul_in_ask(cls, ask: Any) -> Any:
        """No NUL in any string of the ask (labels, drives, models, ...): PostgreSQL reads
        stored specs as `jsonb`, which takes none, in every workspace's pass."""
        where = _nul_at(ask)
        if where is not None:
            raise ValueError(f"{where or 'a value'}: {NUL_PROBLEM}")
        return ask

    @field_validator("retries")
    @classmethod
    def _retries_whole(cls, retries: int, info: ValidationInfo) -> int:
        """A run is retried whole; an array's elements end one by one and are not."""
        ask = info.data.get("requested_resources")
        if retries and ask is not None and ask.array is not None:
            raise ValueError(
                "an array's elements are not retried: give 0, or leave out"
                " requested_resources.array"
            )
        return retries

    @field_validator("env")
    @classmethod
    def _ports(cls, env: dict[str, str]) -> dict[str, str]:
        """A rendezvous port of the user's own must be one: it replaces the one Astraeus holds."""
        for name in USER_PORT_VARIABLES:
            value = env.get(name)
            if value is not None and not (
                value.isascii() and value.isdigit() and 1 <= int(value) <= 65535
            ):
                raise ValueError(
                    f"{name} is {value[:20]!r}: a port is a whole number from 1 to 65535"
                )
        return env


def _nul_at(value: Any, path: str = "") -> str | None:
    """The dotted path of the first string (key or value) holding a NUL, or None."""
    if isinstance(value, str):
        return path if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            inner = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and "\x00" in key:
                return inner
            found = _nul_at(item, inner)
            if found is not None:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _nul_at(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


class Shape(WireModel):
    """How the scheduler split the run, and why: `2 machines × 8 GPUs on InfiniBand fabric ib-0`."""

    tasks: int = Field(ge=1)
    gpus_each: int = Field(ge=0)
    why: str


class Landing(WireModel):
    """Where the run was put, for "Asked and got": the ladder rung and the group's name."""

    rung: str
    where: str
    machines: list[str] = Field(default_factory=list)


class Task(WireModel):
    """One worker of a run: `<run>-<index>`."""

    name: str
    run: str
    index: int = Field(ge=0)
    state: TaskState = TaskState.PENDING
    machine: str | None = None
    assigned_gpu_ids: list[str] = Field(default_factory=list)
    cpu_cores: float = 0
    memory_bytes: int = 0
    environment: dict[str, str] = Field(default_factory=dict)
    reason: str | None = None
    reason_kind: ReasonKind | None = Field(
        default=None, description="what `reason` is while the task waits (`NotEvaluated`, …)"
    )
    placement: PendingExplanation | None = None
    rejections: list[RejectionGroup] | None = Field(
        default=None,
        description="while the task waits: what keeps each machine of `placement` out, as data",
    )
    placement_grouped: GroupedExplanation | None = Field(
        default=None,
        description="with `explain=grouped`, instead of `placement` and `rejections`",
    )
    exit_code: int | None = None
    message: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    machine_silent_since: datetime | None = Field(
        default=None,
        description="while the task's machine is silent (Down) and the task not yet Lost: when"
        " the machine was last heard. The worker may well still run: the task keeps its state"
        " and becomes Lost only `lost_after_seconds` (300) after that",
    )

    @field_serializer("started_at", "ended_at", "machine_silent_since")
    def _iso(self, value: datetime | None) -> str | None:
        return value.isoformat() if value else None


def task_name(run: str, index: int) -> str:
    return f"{run}-{index}"


class Attempt(WireModel):
    """One placement of a run from the start: the first, and one per requeue after a fault."""

    number: int = Field(ge=1, le=MAX_RETRIES + 1)
    started_at: datetime | None = Field(
        default=None, description="when its workers were placed; null while it waits"
    )
    ended_at: datetime | None = None
    reason: str | None = Field(
        default=None,
        description="why it ended, when it did not succeed: the first failed worker's end"
        " (`finetune-0 Failed (exit 1): GPU 3 faulted: Xid 79 …`)",
    )
    workers: int = Field(
        default=0,
        ge=0,
        description="its tasks, `<run>-0` … `<run>-N`; an earlier attempt's logs are read with"
        " `GET /tasks/{task}/logs?attempt=N`",
    )

    @field_serializer("started_at", "ended_at")
    def _iso(self, value: datetime | None) -> str | None:
        return value.isoformat() if value else None


class Run(WireModel):
    """A submitted run as the coordinator keeps it."""

    name: str
    uid: str | None = Field(
        default=None,
        description="this run's identity: a later run may take the name once this one has ended",
    )
    workspace: str
    image: str | None = None
    command: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    priority: int = 0
    time_limit_seconds: int | None = None
    requested_resources: RequestedResources
    retries: int = 0
    retry_on_failure: bool = False
    preemptible: bool = True
    preempted_at: datetime | None = Field(
        default=None,
        description="when the run was last preempted: told to stop for a higher-priority run,"
        " to go back to the queue",
    )
    preempted_for_priority: int | None = Field(
        default=None, description="the priority of the run it was last preempted for"
    )
    preempted_reason: str | None = Field(
        default=None,
        description="why it was last preempted: `Preempted by a higher-priority run`, or"
        " `Reclaimed by a workspace within its guarantee`",
    )
    preemptions: int = Field(
        default=0, ge=0, description="times the run was preempted (they use up no retry)"
    )
    attempt: int = Field(
        default=1, ge=1, description="the attempt now (1, then one more per requeue)"
    )
    attempts: list[Attempt] = Field(
        default_factory=list, description="every attempt so far, the current one last"
    )
    state: RunState = RunState.PENDING
    reason: str | None = None
    reason_kind: ReasonKind | None = Field(
        default=None, description="what `reason` is while the run waits (`QueuedBehind`, …)"
    )
    shape: Shape | None = None
    landing: Landing | None = None
    tasks: list[Task] = Field(default_factory=list)
    submitted_at: datetime
    first_evaluated_at: datetime | None = None
    machine_silent_since: datetime | None = Field(
        default=None,
        description="while a machine running one of its tasks is silent (Down): the earliest"
        " such task's `machine_silent_since`; the run keeps running meanwhile",
    )

    @field_serializer("submitted_at", "first_evaluated_at", "machine_silent_since", "preempted_at")
    def _iso(self, value: datetime | None) -> str | None:
        return value.isoformat() if value else None

    def summary(self) -> dict[str, Any]:
        return {"name": self.name, "state": self.state.value, "reason": self.reason}
