"""Preemption by priority: which lower-priority runs to stop so that a waiting run starts.

The engine is asked "would it fit if these runs were gone" over the pass's snapshot with the
candidate victims' holdings removed (machine by machine, so the trial state is updated only
where they ran), with what the pass placed so far taken again. Victims are added in cost order
(lowest priority first, then fewest GPUs, then most recently started) until the run fits, the
fewest such found by bisection, and then each one the run fits without is dropped, the
costliest first. Runs already stopping for an earlier preemption (`leaving`) count as gone:
a run that fits once they are gone preempts nothing more and holds their machines meanwhile.

Never victims: runs marked `preemptible: false`, runs of equal or higher priority, arrays
(their elements are not requeued whole), and runs already stopping. The rate limit
(`preemption_max_per_minute`) counts preemptions, each stopping as many runs as it needs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from astraeus.coordinator.placement import (
    ClusterSnapshot,
    MachineSnapshot,
    Placement,
    PlacementSession,
    RunRequest,
)
from astraeus.coordinator.placement.live import LiveState
from astraeus.coordinator.store.preemption import LiveRun

from .queue_walk import EngineSession

MAX_DROP_TRIALS = 32
"""How many victims at most are each tried without (the costliest first): past that, the
bisection's prefix is kept as it is."""


@dataclass(frozen=True)
class Plan:
    """A run's start by preemption: the runs to stop (none when the ones already stopping
    make room), where it would then go, and so the machines held for it meanwhile."""

    victims: tuple[LiveRun, ...]
    placement: Placement

    @property
    def machines(self) -> frozenset[str]:
        return frozenset(worker.machine for worker in self.placement.workers)

    @property
    def gpus(self) -> int:
        return sum(run.gpus for run in self.victims)


def cost(run: LiveRun) -> tuple[int, int, float]:
    """Cheapest first: lowest priority, then fewest GPUs, then most recently started (a run
    whose worker has not started yet loses nothing)."""
    started = run.started_at.timestamp() if run.started_at is not None else float("inf")
    return (run.priority, run.gpus, -started)


@dataclass
class Preemption:
    """What a pass needs to plan preemptions: the snapshot, the live runs, how many
    preemptions the rate limit still allows, and what the pass placed so far (a trial takes it
    again, so a plan never counts on GPUs given out this pass)."""

    snapshot: ClusterSnapshot
    runs: Sequence[LiveRun]
    budget: int
    taken: list[Placement] = field(default_factory=list)
    factory: Callable[[ClusterSnapshot], EngineSession] | None = None
    """How a trial's session is built from its snapshot (tests' fake engines); None: the real
    engine over a live state kept for the pass's trials."""
    claimed: set[int] = field(default_factory=set)
    """Victims of this pass's earlier preemptions: stopping, as far as later runs can tell."""
    _live: LiveState | None = None

    @property
    def key(self) -> tuple[object, ...]:
        """What a pass's decisions depend on here besides the queue and the cluster (`memo`):
        the clock alone may lift the rate limit."""
        return (self.budget > 0, tuple(run.seq for run in self.runs if run.leaving))

    def _leaving(self, run: LiveRun) -> bool:
        return run.leaving or run.seq in self.claimed

    def victims_for(self, priority: int) -> list[LiveRun]:
        """The runs a run of `priority` may stop, cheapest first."""
        found = [
            run
            for run in self.runs
            if not self._leaving(run) and run.preemptible and run.priority < priority
        ]
        return sorted(found, key=cost)

    def plan(
        self, request: RunRequest, priority: int, exclude: frozenset[str], now: datetime
    ) -> Plan | None:
        """How `request` (of `priority`) starts by preemption, keeping off `exclude` (machines
        held for runs ahead); None when it cannot, or the rate limit forbids stopping more."""
        leaving = [run for run in self.runs if self._leaving(run)]
        if leaving:
            placed = self._fits(request, leaving, exclude, now)
            if placed is not None:
                return Plan((), placed)
        candidates = self.victims_for(priority)
        if self.budget <= 0 or not candidates:
            return None
        if self._fits(request, [*leaving, *candidates], exclude, now) is None:
            return None
        low, high = 1, len(candidates)  # the fewest cheapest that make room: high fits
        while low < high:
            middle = (low + high) // 2
            if self._fits(request, [*leaving, *candidates[:middle]], exclude, now) is not None:
                high = middle
            else:
                low = middle + 1
        victims = candidates[:high]
        for run in sorted(victims, key=cost, reverse=True)[:MAX_DROP_TRIALS]:
            if len(victims) == 1:
                break
            fewer = [one for one in victims if one is not run]
            if self._fits(request, [*leaving, *fewer], exclude, now) is not None:
                victims = fewer
        placed = self._fits(request, [*leaving, *victims], exclude, now)
        if placed is None:  # bisection assumes more room never hurts; a trial says otherwise
            return None
        return Plan(tuple(victims), placed)

    def spend(self, plan: Plan) -> None:
        """`plan`'s preemption decided: one fewer left this minute, and its victims are no
        later run's."""
        self.budget -= 1
        self.claimed.update(run.seq for run in plan.victims)

    def _fits(
        self, request: RunRequest, gone: Iterable[LiveRun], exclude: frozenset[str], now: datetime
    ) -> Placement | None:
        session = self._session(without(self.snapshot, gone))
        for placement in self.taken:
            session.take(placement)
        result = session.place(request, now, exclude=exclude)
        return result if isinstance(result, Placement) else None

    def _session(self, snapshot: ClusterSnapshot) -> EngineSession:
        if self.factory is not None:
            return self.factory(snapshot)
        if self._live is None:
            self._live = LiveState()
        self._live.update(snapshot)
        return PlacementSession(live=self._live)


def without(snapshot: ClusterSnapshot, gone: Iterable[LiveRun]) -> ClusterSnapshot:
    """`snapshot` with what `gone`'s live tasks hold given back, machine by machine."""
    by_machine: dict[str, list[tuple[LiveRun, int]]] = defaultdict(list)
    for run in gone:
        for i, task in enumerate(run.tasks):
            by_machine[task.machine].append((run, i))
    if not by_machine:
        return snapshot
    machines = tuple(
        _freed(machine, by_machine[machine.name]) if machine.name in by_machine else machine
        for machine in snapshot.machines
    )
    return ClusterSnapshot(machines=machines)


def _freed(machine: MachineSnapshot, tasks: list[tuple[LiveRun, int]]) -> MachineSnapshot:
    gpus, cores, memory = (
        set(machine.used_gpu_ids),
        machine.used_cpu_cores,
        machine.used_memory_bytes,
    )
    runs = set(machine.workers)
    for run, i in tasks:
        task = run.tasks[i]
        gpus.difference_update(task.gpu_ids)
        cores = max(cores - task.cpu_cores, 0.0)
        memory = max(memory - task.memory_bytes, 0)
        runs.discard((run.workspace, run.name))
    return replace(
        machine,
        used_gpu_ids=frozenset(gpus),
        used_cpu_cores=cores,
        used_memory_bytes=memory,
        workers=tuple(sorted(runs)),
    )
