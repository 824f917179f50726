"""Machines as the API shows them and as admins change them: views, cordons, labels,
reservations."""

from __future__ import annotations

from datetime import datetime
from typing import Self

from pydantic import AwareDatetime, Field, model_validator

from .base import UserModel, WireModel
from .report import MAX_LABELS, LabelKey, LabelValue, MachineReport


class ReservationSpec(UserModel):
    """What an admin writes: `labels`, or `workspace` with `starts_at` and `ends_at`."""

    labels: dict[str, str] = Field(default_factory=dict)
    workspace: str | None = Field(default=None, min_length=1, max_length=63)
    starts_at: AwareDatetime | None = None
    ends_at: AwareDatetime | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Self:
        if not self.labels and self.workspace is None:
            raise ValueError(
                "a reservation needs labels, or a workspace with starts_at and ends_at"
            )
        if self.workspace is not None and (self.starts_at is None or self.ends_at is None):
            raise ValueError("a reservation for a workspace needs starts_at and ends_at")
        if self.starts_at and self.ends_at and self.starts_at >= self.ends_at:
            raise ValueError("starts_at must be before ends_at")
        return self


class StoredReservation(WireModel):
    """A reservation as stored and shown: the machine held, for labels or a workspace."""

    id: int
    machine: str
    labels: dict[str, str] = Field(default_factory=dict)
    workspace: str | None = None
    starts_at: datetime | None = None
    ends_at: datetime | None = None


class GpuView(WireModel):
    uuid: str
    index: int
    model: str
    health: str
    task: str | None = None


class GpuModelCount(WireModel):
    """A machine's GPUs of one model: how many, how many are free (as `gpus_free`) and how many
    idle (as `gpus_idle`)."""

    model: str
    total: int
    free: int
    idle: int = 0


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
    gpus_free: int = Field(
        default=0,
        description="GPUs a run could be given now: neither held nor faulted, on a machine that"
        " is Up, not cordoned and under no memory or disk pressure (else 0)",
    )
    gpus_idle: int = Field(
        default=0,
        description="GPUs neither held nor faulted, whatever the machine's state: `gpus_free`"
        " plus those on a Down, cordoned or pressured machine",
    )
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


class ForgottenMachine(WireModel):
    """What forgetting a machine did: its tasks ended, GPUs given back, what went with it."""

    name: str
    forgotten_at: datetime
    tasks_lost: list[str] = Field(
        default_factory=list,
        description="its live tasks, ended Lost (`workspace/task`); their runs settle as for any"
        " Lost task (a gang fails and its other workers are told to stop)",
    )
    gpus_released: int = Field(
        default=0, description="GPUs its tasks held (live ones, and Lost ones still held)"
    )
    reservations_removed: int = 0
    agent_tokens_revoked: int = Field(
        default=0,
        description="its agent tokens, revoked: its agent is refused until an admin makes a"
        " new token, with which it comes back as a new machine",
    )


class MachineDetail(MachineView):
    gpus: list[GpuView] = Field(default_factory=list)
    reservations: list[StoredReservation] = Field(default_factory=list)
    report: MachineReport | None = None


class MachineList(WireModel):
    machines: list[MachineView]


class CordonBody(UserModel):
    reason: str = Field(default="", max_length=1024)


class LabelsBody(UserModel):
    labels: dict[LabelKey, LabelValue] = Field(
        max_length=MAX_LABELS,
        description="the labels admins set; they win over the agent's, and only they may set "
        "labels that grant access (`pool` and the coordinator's `access_labels`)",
    )


class ReservationList(WireModel):
    reservations: list[StoredReservation]
