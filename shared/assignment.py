"""What the coordinator tells an agent to run, and what the agent tells back about it.

`PUT /api/v1/machines/{name}/report` carries a `MachineReport` plus the agent's task updates and
log chunks (`AgentReport`); the reply (`ReportReply`) lists every task this machine should be
running. The agent starts what is new, stops what is marked `cancel`, and keeps retrying each
update until a reply acknowledges its sequence number.

Between coordinator and agent a task is named by its `task_uid` alone: task names (`<run>-<index>`)
repeat across workspaces (and across placements of one run), a uid never does. The name travels
in the assignment for people (logs, unit names), never as a key.
"""

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Final, Self

from pydantic import (
    Field,
    StringConstraints,
    field_serializer,
    field_validator,
    model_validator,
)

from .base import INT64_MAX, WireModel
from .report import MachineReport
from .run import TaskState

TaskUid = Annotated[
    str,
    StringConstraints(pattern=r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"),
]
"""A task's identity in the cluster: a random UUID (lower-case, dashed) the coordinator gives each
assignment, like a Kubernetes pod's `metadata.uid`. Safe as a file or unit name."""

MAX_UPDATES: Final = 1000
"""Task updates in one report; an agent with more sends the oldest first, the rest next time."""
MAX_LOG_CHUNKS: Final = 1000
"""Log chunks in one report."""


class NetworkKind(StrEnum):
    """The network the run's workers were placed on, which decides their NCCL variables."""

    LOCAL = "local"
    """All workers on one machine."""
    NVLINK = "nvlink"
    INFINIBAND = "infiniband"
    RDMA = "rdma"
    ETHERNET = "ethernet"


class Rendezvous(WireModel):
    """Where a multi-worker framework meets: worker 0's machine and a port there."""

    master_addr: str
    master_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="the port worker 0's run holds on its machine; null for a world of one (a"
        " one-worker run, an array element): it holds no port, and its agent gives the worker"
        " a free port of its own, outside the rendezvous range",
    )
    world_size: int = Field(ge=1, le=1_000_000, description="workers in the run")
    rank: int = Field(ge=0, le=1_000_000, description="this worker's index")
    node_rank: int = Field(
        ge=0, le=1_000_000, description="index of this worker's machine among the run's"
    )
    local_world_size: int = Field(
        ge=1, le=1_000_000, description="workers of this run on this machine"
    )
    local_rank: int = Field(
        default=0,
        ge=0,
        le=1_000_000,
        description="this worker's index among the run's workers on this machine",
    )

    @model_validator(mode="after")
    def _port_for_many(self) -> Self:
        if self.master_port is None and self.world_size > 1:
            raise ValueError(f"master_port: a world of {self.world_size} workers needs one")
        return self


class Mount(WireModel):
    """A drive the worker mounts: the agent finds it on its machine by name."""

    name: str
    mount_path: str = Field(description="absolute path inside the worker's container")


class Assignment(WireModel):
    """One task this machine should be running, with everything needed to start it."""

    task_uid: TaskUid = Field(description="the task's identity: updates and logs name it")
    task: str = Field(description="`<run>-<index>`, for people: unique only in its workspace")
    run: str
    workspace: str
    index: int = Field(ge=0, le=1_000_000)
    # Plain strings, not `ProcessText`: a run stored before NUL bytes were refused must fail
    # its own task on the agent, not make every reply to its machine unreadable.
    command: list[str]
    image: str | None = None
    env: dict[str, str] = Field(default_factory=dict, description="the user's own variables")
    assigned_gpu_ids: list[str] = Field(default_factory=list, description="GPU UUIDs")
    cpu_cores: float = 0
    memory_bytes: int = Field(default=0, ge=0, le=INT64_MAX)
    network: NetworkKind = NetworkKind.LOCAL
    min_gbps: float | None = None
    nvlink_domain: str | None = None
    rendezvous: Rendezvous
    drives: list[Mount] = Field(default_factory=list, description="the run's drives")
    time_limit_seconds: int | None = Field(default=None, ge=1, le=INT64_MAX)
    restart_count: int = Field(
        default=0,
        ge=0,
        le=1_000,
        description="times the run was placed again after a fault: `ASTRAEUS_RESTART_COUNT`",
    )
    cancel: bool = Field(default=False, description="stop it: SIGTERM, a grace period, SIGKILL")
    stop_grace_seconds: float | None = Field(
        default=None,
        ge=0,
        le=86_400,
        description="with `cancel`: the grace period between SIGTERM and SIGKILL the coordinator"
        " chose (`preemption_grace_seconds` for a preempted run); None: the agent's own"
        " `stop_grace_seconds`",
    )


class TaskUpdate(WireModel):
    """A task's state change, as the agent saw it."""

    seq: int = Field(
        ge=0, le=INT64_MAX, description="per-agent sequence number, for acknowledgement"
    )
    task_uid: TaskUid = Field(description="the assignment's `task_uid`")
    state: TaskState
    exit_code: int | None = Field(default=None, ge=-(2**31), le=2**31 - 1)
    signal: int | None = Field(default=None, ge=1, le=255)
    message: str | None = Field(default=None, max_length=4096)
    at: datetime

    @field_serializer("at")
    def _iso(self, value: datetime) -> str:
        return value.isoformat()


class LogChunk(WireModel):
    """A piece of a task's output: bytes `offset` to `end` of its log file, as text.

    The coordinator applies chunks by offset: one it already holds (a resend) changes nothing,
    and one starting earlier replaces what it held from there on, so a log never duplicates
    or goes out of order. `end` is needed because `data` is not the bytes themselves (invalid
    UTF-8 becomes U+FFFD, and so does a NUL: PostgreSQL's text holds none, and a worker that
    printed one would otherwise have its machine's every report refused)."""

    task_uid: TaskUid = Field(description="the assignment's `task_uid`")
    offset: int = Field(ge=0, le=INT64_MAX, description="first byte of the chunk in the log")
    end: int = Field(ge=0, le=INT64_MAX, description="the byte after the chunk")
    data: str = Field(min_length=1, max_length=1024 * 1024)

    @field_validator("data")
    @classmethod
    def _no_nul(cls, value: str) -> str:
        return value.replace("\x00", "\ufffd")

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.end <= self.offset:
            raise ValueError(f"end must be more than offset ({self.offset}), got {self.end}")
        return self


MAX_BUSY_PORTS: Final = 1000
"""Busy rendezvous ports in one report."""


class PortSpan(WireModel):
    """Ports `first` to `last`, both included."""

    first: int = Field(ge=1, le=65535)
    last: int = Field(ge=1, le=65535)

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.last < self.first:
            raise ValueError(f"last must be at least first ({self.first}), got {self.last}")
        return self

    def ports(self) -> range:
        return range(self.first, self.last + 1)

    def __contains__(self, port: object) -> bool:
        return isinstance(port, int) and self.first <= port <= self.last


class BusyPort(WireModel):
    """Worker 0 of a task was not started: its rendezvous port is in use on this machine. The
    coordinator gives the task another port; the agent starts it when the port changes."""

    task_uid: TaskUid = Field(description="the assignment's `task_uid`")
    port: int = Field(ge=1, le=65535, description="the assignment's `master_port`")


class AgentReport(WireModel):
    """The body of `PUT /machines/{name}/report`."""

    report: MachineReport
    updates: list[TaskUpdate] = Field(default_factory=list, max_length=MAX_UPDATES)
    logs: list[LogChunk] = Field(default_factory=list, max_length=MAX_LOG_CHUNKS)
    tasks: list[TaskUid] | None = Field(
        default=None,
        max_length=10_000,
        description="the `task_uid` of every task whose worker this agent still runs or is"
        " stopping; the coordinator frees what the machine no longer runs (null: not said)",
    )
    busy_ports: list[BusyPort] = Field(
        default_factory=list,
        max_length=MAX_BUSY_PORTS,
        description="worker 0 tasks not started because their rendezvous port is in use here",
    )
    ports_in_use: list[PortSpan] = Field(
        default_factory=list,
        max_length=MAX_BUSY_PORTS,
        description="every port of the rendezvous range found in use on this machine when a"
        " worker 0's port was, so the coordinator skips them all at once, not one per report",
    )


class ReportReply(WireModel):
    """The coordinator's answer: the tasks this machine should run, and what it has received."""

    acked_seq: int = Field(
        default=-1, ge=-1, le=INT64_MAX, description="highest update seq stored; -1 for none"
    )
    assignments: list[Assignment] = Field(default_factory=list)
    report_interval_seconds: float = Field(default=5.0, gt=0)
    rendezvous_ports: PortSpan | None = Field(
        default=None,
        description="the coordinator's `rendezvous_ports`: workers started through systemd may"
        " bind none of them but their run's own; the agent looks there for ports in use",
    )
