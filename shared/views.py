"""Responses about runs and the cluster: lists, dry runs, logs, the cluster's name and map."""

from __future__ import annotations

from pydantic import Field

from .base import WireModel
from .explanation import GroupedExplanation, PendingExplanation, RejectionGroup
from .reasons import ReasonKind
from .report import GpuHealthState
from .run import Landing, Run, Shape


class RunList(WireModel):
    runs: list[Run]


class WorkerView(WireModel):
    index: int
    machine: str
    assigned_gpu_ids: list[str]
    cpu_cores: float
    memory_bytes: int


class DryRun(WireModel):
    """Where a run would go now (`workers`), or why it would wait (`reason`, `placement`)."""

    would_start: bool
    shape: Shape | None = None
    landing: Landing | None = None
    workers: list[WorkerView] = Field(default_factory=list)
    reason: str | None = None
    reason_kind: ReasonKind | None = None
    placement: PendingExplanation | None = None
    rejections: list[RejectionGroup] | None = None
    placement_grouped: GroupedExplanation | None = Field(
        default=None,
        description="with `explain=grouped`, instead of `placement` and `rejections`",
    )


class LogView(WireModel):
    task: str
    offset: int = Field(description="byte offset of `data` in the task's log; older was dropped")
    data: str


class ClusterView(WireModel):
    """What a client names the cluster by, and where its users open runs."""

    name: str = Field(description="the cluster's name (`cluster_name`)")
    console_url: str = Field(
        description="the console; a run's page is `<console_url>jobs/<cluster>/<run>`"
    )
    version: str = Field(description="the coordinator's package version")


MapGpu = tuple[int, int, GpuHealthState, int | None]
"""One GPU as `[index, model, health, run]`: `model` indexes the answer's `models`, `run` its
`runs` (null: free). An array, not an object: 40,000 GPUs are 0.8 MB of JSON, not 2 MB."""


class MapRun(WireModel):
    """A run holding GPUs. For a member, another workspace's runs are one entry with no name."""

    name: str | None = Field(description="null: a run of another workspace")
    workspace: str | None = None


class MapMachine(WireModel):
    name: str
    state: str = Field(description="Up or Down")
    site: str | None = Field(
        default=None, description="the site label, else the network the agent connects from"
    )
    rack: str | None = None
    fabric: str | None = Field(
        default=None, description="the fabric label, else the fabric its InfiniBand ports report"
    )
    network: str = Field(description="InfiniBand, RoCE or Ethernet: what its active ports are")
    nvlink_domain: str | None = Field(default=None, description="the GPUs' NVLink domain")
    ethernet_mbps: int | None = Field(
        default=None, description="speed of the fastest Ethernet interface that is up"
    )
    cordoned: bool = False
    cordon_reason: str | None = None
    conditions: list[str] = Field(default_factory=list, description="pressure conditions")
    gpus: list[MapGpu] = Field(
        default_factory=list,
        description="each GPU as [index, model (into `models`), health, run (into `runs`) or null]",
    )


class ClusterMap(WireModel):
    """Machines in name order; GPU models and holding runs listed once and referred to by index."""

    models: list[str]
    runs: list[MapRun]
    machines: list[MapMachine]


class WorkspaceUsageView(WireModel):
    """One workspace's use of the cluster (fair share, `GET /api/v1/usage`)."""

    workspace: str
    gpu_hours_day: float = Field(description="GPU-hours its tasks held over the last 24 hours")
    gpu_hours_week: float = Field(description="GPU-hours its tasks held over the last 7 days")
    decayed_gpu_hours: float = Field(
        description="GPU-hours held, each counting half as much every half-life since: what "
        "fair share orders by (divided by the weight)"
    )
    decayed_core_hours: float = Field(
        description="CPU core-hours of its tasks without GPUs, decayed alike"
    )
    weight: float = Field(description="its `fair_share_weight`")
    gpus_now: int = Field(description="GPUs its live tasks hold now")
    share_now: float = Field(description="`gpus_now` over the cluster's GPUs, 0 to 1")
    runs_waiting: int = Field(description="its runs Pending now")


class ClusterUsage(WireModel):
    """The whole cluster's figures, which every caller sees."""

    gpus: int = Field(description="GPUs on Up machines")
    gpus_in_use: int = Field(description="GPUs live tasks hold now")
    gpu_hours_day: float
    gpu_hours_week: float
    runs_waiting: int


class UsageView(WireModel):
    """Usage per workspace (a member: only their own) and the cluster's total."""

    workspaces: list[WorkspaceUsageView]
    cluster: ClusterUsage
    half_life_seconds: float = Field(description="`fair_share_half_life_seconds`")
