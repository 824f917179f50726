"""Workspaces and tokens as admins write and read them."""

from __future__ import annotations

from typing import Annotated, Final, Self

from pydantic import Field, StringConstraints, model_validator

from .base import INT64_MAX, DnsLabel, UserModel, WireModel
from .report import MAX_LABELS, LabelKey, LabelValue
from .run import MAX_PRIORITY

WorkspaceName = DnsLabel
"""A workspace's name: a DNS label, as a run's name is."""

PoolName = Annotated[str, StringConstraints(min_length=1, max_length=253)]
"""A `pool` label's value."""

MAX_POOLS: Final = 256
MAX_GPU_QUOTA: Final = 10_000_000
MAX_CPU_QUOTA: Final = 100_000_000
MAX_FAIR_SHARE_WEIGHT: Final = 1_000_000


class Workspace(WireModel):
    """A workspace: the pools it is granted, its GPU, CPU and memory quotas, the highest
    priority allowed, its fair-share weight, its guaranteed GPUs."""

    name: str
    pools: list[str] = Field(default_factory=list)
    gpu_quota: int | None = None
    cpu_quota: float | None = None
    memory_quota: int | None = None
    max_priority: int = 0
    fair_share_weight: float = 1.0
    guaranteed_gpus: int = 0
    created_at: str


class WorkspaceBody(UserModel):
    """What an admin writes to create or change a workspace (its name is in the path)."""

    pools: list[PoolName] = Field(
        default_factory=list,
        max_length=MAX_POOLS,
        description="machines with pool=<name>; [] is all",
    )
    gpu_quota: int | None = Field(
        default=None, ge=0, le=MAX_GPU_QUOTA, description="GPUs held at once; null: none"
    )
    cpu_quota: float | None = Field(
        default=None, ge=0, le=MAX_CPU_QUOTA, description="CPU cores held at once; null: none"
    )
    memory_quota: int | None = Field(
        default=None, ge=0, le=INT64_MAX, description="bytes of memory held at once; null: none"
    )
    max_priority: int = Field(default=0, ge=-MAX_PRIORITY, le=MAX_PRIORITY)
    fair_share_weight: float = Field(
        default=1.0,
        gt=0,
        le=MAX_FAIR_SHARE_WEIGHT,
        description="among runs of equal priority, the queue puts first the workspace with the"
        " lowest decayed GPU usage divided by this weight",
    )
    guaranteed_gpus: int = Field(
        default=0,
        ge=0,
        le=MAX_GPU_QUOTA,
        description="GPUs the workspace is guaranteed: its runs within them are never stopped"
        " for another workspace's, and while it holds fewer, a run of its own that waits for"
        " room reclaims GPUs lent to workspaces over their guarantee; at most `gpu_quota`",
    )

    @model_validator(mode="after")
    def _guarantee_within_quota(self) -> Self:
        quota = self.gpu_quota
        if quota is not None and self.guaranteed_gpus > quota:
            raise ValueError(
                f"guaranteed_gpus: {self.guaranteed_gpus} is more than gpu_quota {quota}; a"
                " workspace cannot be guaranteed more GPUs than it may hold"
            )
        return self


class WorkspaceSpec(WorkspaceBody):
    """A workspace body with the name from its path: what the store writes."""

    name: WorkspaceName


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


class NewToken(WireModel):
    token: str = Field(description="the secret; shown this once, stored only hashed")
    info: TokenInfoView


class TokenList(WireModel):
    tokens: list[TokenInfoView]
