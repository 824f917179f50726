"""Responses about runs: lists, dry runs, logs, and the cluster's name."""

from __future__ import annotations

from pydantic import Field

from .base import WireModel
from .explanation import GroupedExplanation, PendingExplanation, RejectionGroup
from .reasons import ReasonKind
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
        description="the console; a run's page is `<console_url>#/runs/<name>`"
    )
    version: str = Field(description="the coordinator's package version")
