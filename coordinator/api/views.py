"""Response shapes that are not shared models: machines, dry runs, logs, lists."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from astraeus.coordinator.store import StoredReservation, TokenInfo, Workspace
from astraeus.shared import Landing, MachineReport, PendingExplanation, Run, Shape
from astraeus.shared.base import UserModel, WireModel
from astraeus.shared.explanation import GroupedExplanation, RejectionGroup
from astraeus.shared.reasons import ReasonKind
from astraeus.shared.report import MAX_LABELS, LabelKey, LabelValue


class GpuView(WireModel):
    uuid: str
    index: int
    model: str
    health: str
    task: str | None = None


class GpuModelCount(WireModel):
    """A machine's GPUs of one model: how many, and how many are free (as `gpus_free`)."""

    model: str
    total: int
    free: int


class GpuHealthCounts(WireModel):
    healthy: int = 0
    at_risk: int = 0
    faulted: int = 0


class MachineView(WireModel):
    """A machine as the API shows it: Up or Down, what is free, what runs there."""

    name: str
    state: str
    last_seen: datetime | None = None
    address: str | None = None
    site: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    cordoned: bool = False
    cordon_reason: str | None = None
    gpus_total: int = 0
    gpus_free: int = 0
    gpus_allocated: int = 0
    cpu_cores: float = 0
    cpu_cores_allocated: float = 0
    memory_bytes: int = 0
    memory_bytes_allocated: int = 0
    runs: list[str] = Field(default_factory=list, description="runs with live tasks here")
    gpu_models: list[GpuModelCount] = Field(
        default_factory=list, description="GPUs total and free by model, in the report's order"
    )
    gpu_health: GpuHealthCounts = Field(default_factory=GpuHealthCounts)
    conditions: list[str] = Field(
        default_factory=list, description="pressure conditions the agent reports"
    )
    rack: str | None = Field(default=None, description="the topology.astraeus.io/rack label")
    fabric: str | None = Field(default=None, description="the topology.astraeus.io/fabric label")
    rdma_fabrics: list[str] = Field(
        default_factory=list, description="fabric names the RDMA ports report"
    )
    rdma_link_layers: list[str] = Field(
        default_factory=list, description="link layers of the ACTIVE RDMA ports"
    )
    nvlink_domains: list[str] = Field(
        default_factory=list, description="NVLink domains the GPUs belong to"
    )
    ethernet_mbps: int | None = Field(
        default=None, description="speed of the machine's fastest Ethernet interface that is up"
    )


class MachineDetail(MachineView):
    gpus: list[GpuView] = Field(default_factory=list)
    reservations: list[StoredReservation] = Field(default_factory=list)
    report: MachineReport | None = None


class MachineList(WireModel):
    machines: list[MachineView]


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


class CordonBody(UserModel):
    reason: str = Field(default="", max_length=1024)


class LabelsBody(UserModel):
    labels: dict[LabelKey, LabelValue] = Field(
        max_length=MAX_LABELS,
        description="the labels admins set; they win over the agent's, and only they may set "
        "labels that grant access (`pool` and the coordinator's `access_labels`)",
    )


class WorkspaceBody(UserModel):
    pools: list[str] = Field(default_factory=list, max_length=256)
    gpu_quota: int | None = Field(default=None, ge=0, le=10_000_000)
    max_priority: int = Field(default=0, ge=-1_000_000, le=1_000_000)


class WorkspaceList(WireModel):
    workspaces: list[Workspace]


class TokenBody(UserModel):
    role: str = Field(pattern="^(admin|member|agent)$")
    workspace: str | None = Field(default=None, max_length=63)
    machine: str | None = Field(default=None, min_length=1, max_length=253)
    description: str = Field(default="", max_length=1024)
    labels: dict[LabelKey, LabelValue] = Field(
        default_factory=dict,
        max_length=MAX_LABELS,
        description="agent tokens only: labels admins give the machine now (`pool`, racks...), "
        "added to those it has",
    )


class TokenInfoView(WireModel):
    id: int
    role: str
    workspace: str | None = None
    machine: str | None = None
    description: str = ""
    created_at: str

    @classmethod
    def of(cls, info: TokenInfo) -> TokenInfoView:
        return cls.model_validate(info.as_dict())


class NewToken(WireModel):
    token: str = Field(description="the secret; shown this once, stored only hashed")
    info: TokenInfoView


class TokenList(WireModel):
    tokens: list[TokenInfoView]


class ReservationList(WireModel):
    reservations: list[StoredReservation]
