"""Preemption by priority: which lower-priority runs to stop so that a waiting run starts.

The engine is asked "would it fit if these runs were gone" over the pass's snapshot with the
candidate victims' holdings removed (machine by machine, so the trial state is updated only
where they ran), with what the pass placed so far taken again. Victims are added in cost order
(lowest priority first, then fewest GPUs, then most recently started) until the run fits (the
fewest such: prefixes doubling, then bisection); those with no task on the machines it would
then use are dropped (the run goes to one machine or one group of the rung it uses, and the
cheapest prefix may reach far beyond it), and then each one the run fits without is dropped,
the costliest first. Runs already stopping for an earlier preemption (`leaving`)
count as gone for the run they stop for: it preempts nothing more while it fits once they are
gone, and holds their machines meanwhile.

Never victims: runs marked `preemptible: false`, runs of equal or higher priority, arrays
(their elements are not requeued whole), runs already stopping, and runs within their
workspace's guarantee (`guaranteed_gpus`, its oldest runs first) for another workspace's run.
The rate limit (`preemption_max_per_minute`) counts preemptions, each stopping as many runs as
it needs.

Reclaim (issue 28.2) is the same search with other victims: a run of a workspace below its
guarantee, which would stay within it, may stop runs of other workspaces beyond their own
guarantees whatever their priority.

Speed (at 5,000 machines an engine trial is tens of milliseconds, and a 64-GPU gang's search
asked it two dozen times): a trial is asked of the engine only when an upper bound of the GPUs
it could give the run reaches what the run asks (`_Room`: the free GPUs off the held machines,
those this pass placed taken off, plus what the runs gone would give back; one machine's for a
run kept within one). A trial the bound rules out is one the engine would refuse, so the search
goes the same way and chooses the same victims as when every trial asks the engine (the tests
compare the two over random clusters); a search every candidate together cannot serve ends
before its first trial. The candidates are sorted by cost once a pass, not once a search.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from astraeus.coordinator.placement import (
    ClusterSnapshot,
    MachineSnapshot,
    Placement,
    PlacementSession,
    RunRequest,
    ladder,
)
from astraeus.coordinator.placement.live import LiveState
from astraeus.coordinator.placement.needs import Needs
from astraeus.coordinator.store.preemption import LiveRun

from .queue_walk import EngineSession

MAX_DROP_TRIALS = 16
"""How many victims at most are each tried without (the costliest first): past that, the
bisection's prefix is kept as it is."""

MAX_SEARCHES_PER_PASS = 4
"""Runs per pass whose victims are searched for (the first in queue order: the highest
priority): each search asks the engine a dozen times or more, and a queue of thousands that
could each preempt must not make every pass that long. The next pass goes on."""


@dataclass(frozen=True)
class Plan:
    """A run's start by preemption: the runs to stop (none when the ones already stopping
    make room), where it would then go, and so the machines held for it meanwhile;
    `reclaimed`, the victims stopped only because the run reclaims its guarantee."""

    victims: tuple[LiveRun, ...]
    placement: Placement
    reclaimed: frozenset[int] = frozenset()

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
    by_priority: bool = True
    """`preemption = "priority"`; false: only reclaim (some workspace has a guarantee)."""
    protected: frozenset[int] = frozenset()
    """Runs within their workspace's guarantee (`within_guarantees`)."""
    taken: list[Placement] = field(default_factory=list)
    factory: Callable[[ClusterSnapshot], EngineSession] | None = None
    """How a trial's session is built from its snapshot (tests' fake engines); None: the real
    engine over `live`."""
    live: LiveState | None = None
    """The trials' live state: kept between passes by the scheduler (`PassState.trials`), so
    each trial, and the next pass's first, is brought up to date only where machines changed;
    None: one of its own."""
    searches: int = MAX_SEARCHES_PER_PASS
    """Victim searches left this pass."""
    claimed: set[int] = field(default_factory=set)
    """Victims of this pass's earlier preemptions: stopping, as far as later runs can tell."""
    leaving: tuple[int, ...] | None = None
    """The runs told to stop (`store.preemption.leaving_runs`), read cheaply for `key`; None:
    from `runs`."""
    _lowest_found: float | None = field(default=None, init=False)
    _by_cost: list[LiveRun] | None = field(default=None, init=False)
    _free: dict[str, int] | None = field(default=None, init=False)
    """How many GPUs of each machine are free, less those `taken` placed (its first
    `_counted`; `_taken_ids`, by machine)."""
    _counted: int = field(default=0, init=False)
    _taken_ids: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set), init=False)
    _at_snapshot: bool = field(default=False, init=False)
    _groups: dict[tuple[object, ...], Groups] = field(default_factory=dict, init=False)

    @property
    def _lowest(self) -> float:
        """The lowest priority of a run that may be stopped at all (`runs` read then)."""
        if self._lowest_found is None:
            stoppable = [r.priority for r in self.runs if r.preemptible and not r.leaving]
            self._lowest_found = min(stoppable, default=float("inf"))
        return self._lowest_found

    @property
    def key(self) -> tuple[object, ...]:
        """What a pass's decisions depend on here besides the queue and the cluster (`memo`):
        the clock alone may lift the rate limit."""
        leaving = self.leaving
        if leaving is None:
            leaving = tuple(run.seq for run in self.runs if run.leaving)
        return (self.budget > 0, leaving)

    def _leaving(self, run: LiveRun) -> bool:
        return run.leaving or run.seq in self.claimed

    def victims_for(self, priority: int, workspace: str, reclaim: bool) -> list[LiveRun]:
        """The runs a run of `priority` in `workspace` may stop, cheapest first; `reclaim`: it
        reclaims its workspace's guarantee."""
        if self._by_cost is None:  # a stable sort once: filtering it keeps the order
            self._by_cost = sorted(self.runs, key=cost)
        return [
            run
            for run in self._by_cost
            if not self._leaving(run)
            and run.preemptible
            and (
                self._by_priority(run, priority, workspace)
                or self._by_reclaim(run, workspace, reclaim)
            )
        ]

    def _by_priority(self, run: LiveRun, priority: int, workspace: str) -> bool:
        """Lower priority, and not within its guarantee unless the two are one workspace's."""
        if not self.by_priority or run.priority >= priority:
            return False
        return run.workspace == workspace or run.seq not in self.protected

    def _by_reclaim(self, run: LiveRun, workspace: str, reclaim: bool) -> bool:
        """Another workspace's run beyond that workspace's guarantee."""
        return reclaim and run.workspace != workspace and run.seq not in self.protected

    def plan(
        self,
        request: RunRequest,
        priority: int,
        exclude: frozenset[str],
        now: datetime,
        *,
        reclaim: bool = False,
        seq: int | None = None,
    ) -> Plan | None:
        """How `request` (of `priority`; `seq`, its row) starts by preemption, keeping off
        `exclude` (machines held for runs ahead); None when it cannot, or the rate limit
        forbids stopping more. `reclaim`: its workspace is below its guarantee and would stay
        within it. A run whose victims are still stopping holds the machines they free up."""
        leaving = [run for run in self.runs if self._leaving(run)]
        room = self._room(request, exclude)
        if seq is not None and any(run.preempted_for == seq for run in leaving):
            placed = self._fits(request, leaving, exclude, now, room)
            if placed is not None:
                return Plan((), placed)
        if self.budget <= 0 or self.searches <= 0:
            return None
        if not reclaim and (not self.by_priority or priority <= self._lowest):
            return None  # no run of lower priority may be stopped: no search at all
        candidates = self.victims_for(priority, request.workspace, reclaim)
        if not candidates:
            return None
        self.searches -= 1
        if not room.could([*leaving, *candidates]):
            return None  # every trial below would be refused: a subset gives back less
        # The fewest cheapest that make room: prefixes of 1, 2, 4, ... candidates until one
        # fits (a small run is served by its first victims in a trial or two), then bisection.
        found, low, size = None, 1, 1
        while found is None:
            found = self._fits(request, [*leaving, *candidates[:size]], exclude, now, room)
            if found is None:
                if size == len(candidates):
                    return None  # not even with every candidate gone
                low, size = size + 1, min(2 * size, len(candidates))
        high, placed = size, found
        while low < high:
            middle = (low + high) // 2
            found = self._fits(request, [*leaving, *candidates[:middle]], exclude, now, room)
            if found is not None:
                high, placed = middle, found
            else:
                low = middle + 1
        victims = candidates[:high]
        # The prefix is the cheapest over every machine, the run goes to one machine or group:
        # runs with no task where it goes gave it nothing, and are not stopped for it.
        used = {worker.machine for worker in placed.workers}
        there = [run for run in victims if any(task.machine in used for task in run.tasks)]
        if there and len(there) < len(victims):
            found = self._fits(request, [*leaving, *there], exclude, now, room)
            if found is not None:
                victims, placed = there, found
        for run in sorted(victims, key=cost, reverse=True)[:MAX_DROP_TRIALS]:
            if len(victims) == 1:
                break
            fewer = [one for one in victims if one is not run]
            found = self._fits(request, [*leaving, *fewer], exclude, now, room)
            if found is not None:
                victims, placed = fewer, found
        reclaimed = frozenset(
            run.seq for run in victims if not self._by_priority(run, priority, request.workspace)
        )
        return Plan(tuple(victims), placed, reclaimed)

    def spend(self, plan: Plan) -> None:
        """`plan`'s preemption decided: one fewer left this minute, and its victims are no
        later run's."""
        self.budget -= 1
        self.claimed.update(run.seq for run in plan.victims)

    def _fits(
        self,
        request: RunRequest,
        gone: Sequence[LiveRun],
        exclude: frozenset[str],
        now: datetime,
        room: _Room,
    ) -> Placement | None:
        """Where `request` goes with `gone` stopped; None when it cannot go (the engine is
        not asked when `room` says it could not)."""
        if not room.could(gone):
            return None
        session = self._session(without(self.snapshot, gone))
        for placement in self.taken:
            session.take(placement)
        result = session.place(request, now, exclude=exclude)
        return result if isinstance(result, Placement) else None

    def _room(self, request: RunRequest, exclude: frozenset[str]) -> _Room:
        """The bound of this search's trials: the free GPUs, machine by machine, as the pass
        left them (the GPUs of its placements so far taken), off the machines in `exclude`,
        in the groups the engine may place `request` in."""
        if self.factory is not None:
            return _Room(0, {}, exclude, Groups({}, 0))  # a test's engine: no bound
        live = self._current()
        if self._free is None:
            self._free = {
                facts.name: len(free.gpu_ids)
                for facts, free in zip(live.frame.facts, live.free, strict=True)
            }
        if self._counted < len(self.taken):
            index = live.frame.index
            for placement in self.taken[self._counted :]:
                for worker in placement.workers:
                    self._taken_ids[worker.machine].update(worker.gpu_ids)
                    if worker.machine in index:
                        ids = live.free[index[worker.machine]].gpu_ids
                        self._free[worker.machine] = len(ids - self._taken_ids[worker.machine])
            self._counted = len(self.taken)
        free = {name: gpus for name, gpus in self._free.items() if name not in exclude}
        return _Room(request.ask.gpu_count, free, exclude, self._groups_for(request))

    def _current(self) -> LiveState:
        """The trials' live state at the pass's snapshot (a trial leaves it at its own), once
        a pass: what the machines are, and what is free before any run is stopped."""
        if self.live is None:
            self.live = LiveState()
        if not self._at_snapshot:
            self.live.update(self.snapshot)
            self._at_snapshot = True
        return self.live

    def _groups_for(self, request: RunRequest) -> Groups:
        """The groups of machines the engine may place `request` in (every group of each rung
        its rules allow but a single machine's, as `placement.gang.search` climbs them), kept
        for the pass by what they depend on."""
        needs = Needs(request)
        rungs = tuple(rung for rung in ladder.allowed_rungs(needs) if not rung.single)
        key = (needs.min_gbps, needs.keep_within, needs.link, tuple(r.name for r in rungs))
        if key not in self._groups:
            frame = self._current().frame
            cluster = frame.cluster(needs.min_gbps)
            names = [facts.name for facts in frame.facts]
            of: dict[str, list[int]] = defaultdict(list)
            count = 0
            for rung in rungs:
                for members in cluster.groups(rung, needs).values():
                    for i in members:
                        of[names[i]].append(count)
                    count += 1
            self._groups[key] = Groups(of, count)
        return self._groups[key]

    def _session(self, snapshot: ClusterSnapshot) -> EngineSession:
        if self.factory is not None:
            return self.factory(snapshot)
        if self.live is None:
            self.live = LiveState()
        self.live.update(snapshot)
        self._at_snapshot = snapshot is self.snapshot
        return PlacementSession(live=self.live)


@dataclass(frozen=True)
class Groups:
    """Groups of machines a run may be placed in: each machine's groups (by number), and how
    many there are."""

    of: Mapping[str, Sequence[int]]
    count: int


class _Room:
    """An upper bound of the GPUs a trial could give a run asking `need`: the most that one
    machine, or one group of machines the run may span (`groups`), holds free (`free`, by
    machine, off the machines in `exclude`) once the runs gone give theirs back. It counts
    every GPU, healthy or not, of any model, whoever reserved it; and the engine places a run
    on one machine or within one group. So when the bound is short of `need`, the engine finds
    no placement either."""

    def __init__(
        self, need: int, free: Mapping[str, int], exclude: frozenset[str], groups: Groups
    ) -> None:
        self.need, self.free, self.exclude, self.groups = need, free, exclude, groups
        held = [0] * groups.count
        for name, gpus in free.items():
            for group in groups.of.get(name, ()):
                held[group] += gpus
        self.held = held
        self.most = max([*free.values(), *held], default=0)

    def could(self, gone: Iterable[LiveRun]) -> bool:
        """Whether the engine might place the run with `gone` stopped."""
        if self.need <= 0 or self.most >= self.need:
            return True  # a run without GPUs (the bound says nothing), or room already
        freed: dict[str, int] = defaultdict(int)
        for run in gone:
            for task in run.tasks:
                if task.machine in self.free:  # a machine it may use
                    freed[task.machine] += len(task.gpu_ids)
        more: dict[int, int] = defaultdict(int)
        for name, gpus in freed.items():
            if self.free[name] + gpus >= self.need:
                return True
            for group in self.groups.of.get(name, ()):
                more[group] += gpus
        return any(self.held[group] + gpus >= self.need for group, gpus in more.items())


def within_guarantees(runs: Iterable[LiveRun], guarantees: Mapping[str, int]) -> frozenset[int]:
    """The runs within their workspace's guarantee: its oldest live runs (by first start; runs
    not started yet last) whose GPUs together stay within `guaranteed_gpus`."""
    by_workspace: dict[str, list[LiveRun]] = defaultdict(list)
    for run in runs:
        if guarantees.get(run.workspace, 0) > 0 and not run.leaving:
            by_workspace[run.workspace].append(run)
    found: set[int] = set()
    for workspace, mine in by_workspace.items():
        held, guarantee = 0, guarantees[workspace]
        for run in sorted(mine, key=_start_order):
            held += run.gpus
            if held > guarantee:
                break
            found.add(run.seq)
    return frozenset(found)


def _start_order(run: LiveRun) -> tuple[float, int]:
    started = run.started_at.timestamp() if run.started_at is not None else float("inf")
    return (started, run.seq)


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
