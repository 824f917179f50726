"""What the coordinator tells an agent to run, and what the agent tells back about it.

`PUT /api/v1/machines/{name}/report` carries a `MachineReport` plus the agent's task updates and
log chunks (`AgentReport`); the reply (`ReportReply`) lists every task this machine should be
running. The agent starts what is new, stops what is marked `cancel`, and keeps retrying each
update until a reply acknowledges its sequence number.
"""

from datetime import datetime
from enum import StrEnum
from typing import Annotated

from pydantic import Field, field_serializer

from .base import WireModel
from .report import MachineReport
from .run import TaskState


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
    master_port: int = Field(ge=1, le=65535)
    world_size: int = Field(ge=1, description="workers in the run")
    rank: int = Field(ge=0, description="this worker's index")
    node_rank: int = Field(ge=0, description="index of this worker's machine among the run's")
    local_world_size: int = Field(ge=1, description="workers of this run on this machine")
    local_rank: int = Field(
        default=0, ge=0, description="this worker's index among the run's workers on this machine"
    )


class Mount(WireModel):
    """A drive the worker mounts: the agent finds it on its machine by name."""

    name: str
    mount_path: str = Field(description="absolute path inside the worker's container")


class Assignment(WireModel):
    """One task this machine should be running, with everything needed to start it."""

    task: str = Field(description="`<run>-<index>`")
    run: str
    workspace: str
    index: int = Field(ge=0)
    command: list[str]
    image: str | None = None
    env: dict[str, str] = Field(default_factory=dict, description="the user's own variables")
    assigned_gpu_ids: list[str] = Field(default_factory=list, description="GPU UUIDs")
    cpu_cores: float = 0
    memory_bytes: int = 0
    network: NetworkKind = NetworkKind.LOCAL
    min_gbps: float | None = None
    nvlink_domain: str | None = None
    rendezvous: Rendezvous
    drives: list[Mount] = Field(default_factory=list, description="the run's drives")
    time_limit_seconds: int | None = None
    cancel: bool = Field(default=False, description="stop it: SIGTERM, a grace period, SIGKILL")


class TaskUpdate(WireModel):
    """A task's state change, as the agent saw it."""

    seq: int = Field(ge=0, description="per-agent sequence number, for acknowledgement")
    task: str
    state: TaskState
    exit_code: int | None = None
    signal: int | None = None
    message: str | None = Field(default=None, max_length=4096)
    at: datetime

    @field_serializer("at")
    def _iso(self, value: datetime) -> str:
        return value.isoformat()


class LogChunk(WireModel):
    """A piece of a task's output, from `offset` bytes into its log file."""

    task: str
    offset: int = Field(ge=0)
    data: str = Field(max_length=1024 * 1024)


class AgentReport(WireModel):
    """The body of `PUT /machines/{name}/report`."""

    report: MachineReport
    updates: list[TaskUpdate] = Field(default_factory=list)
    logs: list[LogChunk] = Field(default_factory=list)
    tasks: list[Annotated[str, Field(max_length=512)]] | None = Field(
        default=None,
        max_length=10_000,
        description="every task whose worker this agent still runs or is stopping; the"
        " coordinator frees what the machine no longer runs (null: not said)",
    )


class ReportReply(WireModel):
    """The coordinator's answer: the tasks this machine should run, and what it has received."""

    acked_seq: int = Field(default=-1, description="highest update seq stored; -1 for none")
    assignments: list[Assignment] = Field(default_factory=list)
    report_interval_seconds: float = Field(default=5.0, gt=0)
