"""The placement engine's inputs and outputs: plain frozen data, no I/O.

The coordinator builds a `ClusterSnapshot` once per scheduler pass and a `RunRequest` per run,
calls `place(run, snapshot, now)`, and gets back a `Placement` or a `Pending`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from astraeus.shared import (
    Landing,
    MachineReport,
    MachineState,
    NetworkKind,
    PendingExplanation,
    RequestedResources,
    Shape,
)
from astraeus.shared.explanation import RejectionGroup
from astraeus.shared.reasons import ReasonKind

from .verdicts import Verdicts

RunKey = tuple[str, str]
"""A run's identity in the cluster: (workspace, name). Names alone repeat across workspaces."""


@dataclass(frozen=True)
class Reservation:
    """A machine held back: for runs selecting `labels`, or for `workspace` between two times."""

    labels: dict[str, str] = field(default_factory=dict)
    workspace: str | None = None
    starts_at: datetime | None = None
    ends_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class MachineSnapshot:
    """One machine of a `ClusterSnapshot`, as the scheduler sees it for one pass: the agent's
    latest report plus what is taken. (The API's answer about a machine is `MachineView`, in
    `shared/machines.py`.)"""

    name: str
    state: MachineState
    report: MachineReport | None
    """None when the machine never reported; it is Down then."""
    site: str | None = None
    """The `topology.astraeus.io/site` label, else the network the agent connects from."""
    cordon_reason: str | None = None
    """None when the machine accepts runs; a cordoned machine has a (possibly empty) reason."""
    used_gpu_ids: frozenset[str] = frozenset()
    """UUIDs of GPUs held by live tasks."""
    used_cpu_cores: float = 0
    used_memory_bytes: int = 0
    reservations: tuple[Reservation, ...] = ()
    workers: tuple[RunKey, ...] = ()
    """The runs with live tasks here."""
    report_key: str | None = None
    """Equal for two reports exactly when placement reads the same of them (the store's
    fingerprint, with the labels admins set): how the live state tells a changed machine from
    a heartbeat. None: the reports themselves are compared."""

    @property
    def labels(self) -> dict[str, str]:
        return self.report.labels if self.report else {}


@dataclass(frozen=True)
class ClusterSnapshot:
    """Every machine, sorted by name, taken once for a scheduler pass."""

    machines: tuple[MachineSnapshot, ...]


@dataclass(frozen=True)
class RunRequest:
    """A run to place, with the context its placement depends on."""

    name: str
    workspace: str
    ask: RequestedResources
    pools: tuple[str, ...] = ()
    """The workspace's pools: always added to the selection (`pool=<name>`, any of them)."""
    image: str | None = None
    """A run with an image needs the `container` capability."""
    time_limit_seconds: int | None = None
    first_evaluated_at: datetime | None = None
    """When the scheduler first looked at this run; patience counts from here."""
    array_index: int | None = None
    """For one task of an array run: which one. Each array task is placed on its own."""

    @property
    def key(self) -> RunKey:
        return (self.workspace, self.name)


@dataclass(frozen=True)
class WorkerPlacement:
    index: int
    machine: str
    gpu_ids: tuple[str, ...]
    """GPU UUIDs."""
    cpu_cores: float
    memory_bytes: int


@dataclass(frozen=True)
class Placement:
    """Where every worker of the run goes."""

    workers: tuple[WorkerPlacement, ...]
    shape: Shape
    landing: Landing
    network: NetworkKind
    nvlink_domain: str | None = None


@dataclass(frozen=True)
class Pending:
    """Why the run cannot be placed now."""

    headline: str
    """The sentence for the run's reason: `No machine fits: 3 of 3 machines ready`, or the one
    non-room reason every machine gives."""
    explained: Verdicts
    """Why each machine is out, made into the guide's explanation (`explanation`, with
    `rejections`) or the grouped one on demand."""
    kind: ReasonKind = ReasonKind.NO_MACHINE_FITS
    """What `headline` is, as data."""
    patience_remaining_seconds: int | None = None
    """Set while the run waits for a tighter rung that could become free."""
    wanted_machines: tuple[str, ...] = ()
    """The machines the run would use if they were idle; empty when no machine could ever take
    it. The scheduler holds these for the head of the queue so smaller runs cannot starve it."""

    @property
    def explanation(self) -> PendingExplanation:
        return self.explained.full()

    @property
    def rejections(self) -> list[RejectionGroup]:
        """What keeps each machine of `explanation.nodes` out, as data."""
        return self.explained.groups()


PlacementResult = Placement | Pending
