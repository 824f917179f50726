"""Preemption by priority: which lower-priority runs to stop so that a waiting run starts.

The engine is asked "would it fit if these runs were gone" over the pass's snapshot with the
candidate victims' holdings removed (machine by machine, so the trial state is updated only
where they ran), with what the pass placed so far taken again. The candidates are the runs
with a task on a machine the run may use (one of the groups of the rungs its rules allow, or
one with GPUs enough to take it alone): stopping any other gives it nothing. Victims are added
in cost order (lowest priority first, then fewest GPUs, then most recently started) until the
run fits (the fewest such: prefixes doubling, then bisection); those with no task on the
machines it would then use are dropped (the run goes to one machine or one group of the rung
it uses, and the cheapest prefix may reach beyond it), and then each one the run fits without
is dropped, the costliest first. Runs already stopping for an earlier preemption (`leaving`)
count as gone: the run they stop for preempts nothing more while it fits once they are gone,
and holds their machines meanwhile; another run that fits once they are gone stops nothing
(it would stop a run for nothing).

Never victims: runs marked `preemptible: false`, runs of equal or higher priority, arrays
(their elements are not requeued whole), runs already stopping, and runs within their
workspace's guarantee (`guaranteed_gpus`, its oldest runs first) for another workspace's run.
The rate limit (`preemption_max_per_minute`) counts preemptions, each stopping as many runs as
it needs.

Reclaim (issue 28.2) is the same search with other victims: a run of a workspace below its
guarantee, which would stay within it, may stop runs of other workspaces beyond their own
guarantees whatever their priority.

Speed (at 5,000 machines an engine trial is tens to hundreds of milliseconds, and a 64-GPU
gang's search asked for two dozen): a trial is asked of the engine only when an upper bound of
the GPUs it could give the run reaches what the run asks (`_Room`: on one machine, or in one
group the run may span, the free GPUs off the held machines, those this pass placed taken off,
plus what the runs gone would give back). A trial the bound rules out is one the engine would
refuse, so the search goes the same way and chooses the same victims as when every trial asks
the engine (`tests/coordinator/test_preemption_search.py` compares the two over random
clusters); a search all candidates together cannot serve ends before its first trial.
Leaving out the runs on machines the run cannot use changes which prefixes are tried, not the
answer, as long as giving more back never keeps a run from fitting (the same tests check it). The
candidates are sorted by cost once a pass; a trial's machines with runs gone are made once a
pass (`without`'s `made`), so the trials' live state reads again only the machines where the
runs gone differ from the last trial's.
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
    shape,
)
from astraeus.coordinator.placement.cache import LiveState
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
    _sizes: dict[str, int] = field(default_factory=dict, init=False)
    """How many GPUs each machine has."""
    _taken_ids: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set), init=False)
    _at_snapshot: bool = field(default=False, init=False)
    _made: Freed = field(default_factory=dict, init=False)
    _gone: list[LiveRun] | None = field(default=None, init=False)
    """The runs stopping (`leaving`, or `claimed` this pass), in run order."""
    """The trials' machines with runs gone (`without`), kept for the pass."""
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

    def victims_for(self, priority: int, workspace: str, reclaim: bool) -> list[LiveRun]:
        """The runs a run of `priority` in `workspace` may stop, cheapest first; `reclaim`: it
        reclaims its workspace's guarantee."""
        if self._by_cost is None:  # a stable sort once: filtering it keeps the order
            self._by_cost = sorted(self.runs, key=cost)
        claimed = self.claimed
        return [
            run
            for run in self._by_cost
            if run.preemptible
            and not run.leaving
            and run.seq not in claimed
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
        if self._gone is None:  # once a pass, and again after each preemption decided
            claimed = self.claimed
            self._gone = [run for run in self.runs if run.leaving or run.seq in claimed]
        leaving = self._gone
        if seq is not None and any(run.preempted_for == seq for run in leaving):
            placed = self._fits(request, leaving, exclude, now, self._room(request, exclude))
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
        room = self._room(request, exclude)
        # Runs with no task on a machine the run may use give it nothing: the trials leave them
        # out (each prefix of the rest is the rule's prefix less what does not count).
        candidates = room.touching(candidates)
        if not candidates or not room.could([*leaving, *candidates]):
            return None  # every trial below would be refused: a subset gives back less
        if leaving and self._fits(request, leaving, exclude, now, room) is not None:
            return None  # the runs already stopping make room: none is stopped for nothing
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
        self._gone = None

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
        session = self._session(without(self.snapshot, gone, self._made))
        for placement in self.taken:
            session.take(placement)
        result = session.place(request, now, exclude=exclude)
        return result if isinstance(result, Placement) else None

    def _room(self, request: RunRequest, exclude: frozenset[str]) -> _Room:
        """The bound of this search's trials: the free GPUs, machine by machine, as the pass
        left them (the GPUs of its placements so far taken), off the machines in `exclude`,
        in the groups the engine may place `request` in."""
        if self.factory is not None:
            return _Room(0, {}, exclude, Groups({}, 0), {})  # a test's engine: no bound
        live = self._current()
        if self._free is None:
            names = list(live.frame.index)  # the machines' names, in the frame's order
            self._free = {
                name: len(free.gpu_ids) for name, free in zip(names, live.free, strict=True)
            }
            self._sizes = {
                name: len(facts.gpus) for name, facts in zip(names, live.frame.facts, strict=True)
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
        groups = self._groups_for(request)
        return _Room(request.ask.gpu_count, free, exclude, groups, self._sizes)

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
        its rules allow but a single machine's, as `placement.gang.search` climbs them) and
        its shapes of two or more workers, kept for the pass by what they depend on."""
        needs = Needs(request)
        rungs = tuple(rung for rung in ladder.allowed_rungs(needs) if not rung.single)
        most = max(self._sizes.values(), default=0)
        shapes = tuple(
            (option.tasks, option.gpus_each)
            for option in shape.options(needs)
            if option.tasks > 1 and 0 < option.gpus_each <= most
        )
        key = (
            needs.min_gbps,
            needs.keep_within,
            needs.link,
            tuple(r.name for r in rungs),
            shapes,
            needs.stacks,
        )
        if key not in self._groups:
            frame = self._current().frame
            cluster = frame.cluster(needs.min_gbps)
            names = list(frame.index)
            of: dict[str, list[int]] = defaultdict(list)
            count = 0
            for rung in rungs if shapes else ():
                for members in cluster.groups(rung, needs).values():
                    for i in members:
                        of[names[i]].append(count)
                    count += 1
            self._groups[key] = Groups(of, count, shapes, needs.stacks)
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
    """Groups of machines a run may span, and how it may be split over them: each machine's
    groups (by number), how many groups there are, the run's shapes of two or more workers
    (workers, GPUs each), and whether workers may share a machine (`stacks`)."""

    of: Mapping[str, Sequence[int]]
    count: int
    shapes: tuple[tuple[int, int], ...] = ()
    stacks: bool = False


class _Room:
    """An upper bound of what a trial could give a run asking `need` GPUs: one machine with
    that many free (`free`, by machine, off the machines in `exclude`), or one group of
    machines the run may span with room for the workers of one of its shapes (a worker of `g`
    GPUs on each machine with `g` free; `g` at a time when workers may share a machine), once
    the runs gone give theirs back. It counts every GPU, healthy or not, of any model,
    whoever reserved it; and the engine places a run on one machine or, in one of its shapes,
    within one group (`placement.gang.search`). So when the bound says no, the engine finds
    no placement either."""

    def __init__(
        self,
        need: int,
        free: Mapping[str, int],
        exclude: frozenset[str],
        groups: Groups,
        sizes: Mapping[str, int],
    ) -> None:
        self.need, self.free, self.exclude, self.groups = need, free, exclude, groups
        self.sizes = sizes
        self.shapes = groups.shapes if groups.count else ()
        workers = [[0] * len(self.shapes) for _ in range(groups.count)]
        for name, gpus in free.items() if self.shapes else ():
            slots = self._slots(gpus)
            for group in groups.of.get(name, ()) if any(slots) else ():
                counts = workers[group]
                for k, slot in enumerate(slots):
                    counts[k] += slot
        self.workers = workers
        """Each group's room: how many workers of each shape its free GPUs hold."""
        self.roomy = max(free.values(), default=0) >= need or any(
            counts[k] >= tasks for counts in workers for k, (tasks, _each) in enumerate(self.shapes)
        )
        """The run could go somewhere with nothing stopped (it never does when the walk
        searches: then the bound says nothing)."""

    def _slots(self, gpus: int) -> list[int]:
        """How many workers of each shape `gpus` free GPUs on one machine hold."""
        if self.groups.stacks:
            return [gpus // each for _tasks, each in self.shapes]
        return [int(gpus >= each) for _tasks, each in self.shapes]

    def touching(self, runs: list[LiveRun]) -> list[LiveRun]:
        """`runs` with a task on a machine the run may use: in one of its groups, or with GPUs
        enough (`sizes`: every GPU it has) to take it alone."""
        if self.need <= 0:
            return runs
        sizes, spans, need = self.sizes, bool(self.shapes), self.need
        usable = [
            name
            for name in self.free
            if (spans and name in self.groups.of) or sizes.get(name, 0) >= need
        ]
        if not self.exclude and len(usable) == len(sizes):
            return runs  # every machine: only a run on none of them would be left out
        known = frozenset(usable)
        return [run for run in runs if any(task.machine in known for task in run.tasks)]

    def could(self, gone: Iterable[LiveRun]) -> bool:
        """Whether the engine might place the run with `gone` stopped."""
        if self.need <= 0 or self.roomy:
            return True  # a run without GPUs, or room already: the bound says nothing
        free, need = self.free, self.need
        freed: dict[str, int] = defaultdict(int)
        for run in gone:
            for task in run.tasks:
                if task.machine in free:  # a machine it may use
                    freed[task.machine] += len(task.gpu_ids)
                    if free[task.machine] + freed[task.machine] >= need:
                        return True  # room on one machine
        shapes = len(self.shapes)
        if not shapes:
            return False
        more: dict[int, list[int]] = {}
        for name, gpus in freed.items():
            before = free[name]
            gained = [
                after - was
                for after, was in zip(self._slots(before + gpus), self._slots(before), strict=True)
            ]
            if not any(gained):
                continue
            for group in self.groups.of.get(name, ()):
                counts = more.setdefault(group, [0] * shapes)
                for k, slot in enumerate(gained):
                    counts[k] += slot
        return any(
            self.workers[group][k] + counts[k] >= tasks
            for group, counts in more.items()
            for k, (tasks, _each) in enumerate(self.shapes)
        )


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


Freed = dict[tuple[str, tuple[tuple[int, int], ...]], MachineSnapshot]
"""Machines with some tasks given back, by name and the tasks (run row, task index, in order)."""


def without(
    snapshot: ClusterSnapshot, gone: Iterable[LiveRun], made: Freed | None = None
) -> ClusterSnapshot:
    """`snapshot` with what `gone`'s live tasks hold given back, machine by machine. `made`
    keeps the machines made, so that a later call giving back the same tasks on a machine
    returns the same object (the trials' live state then reads nothing again there)."""
    by_machine: dict[str, list[tuple[LiveRun, int]]] = defaultdict(list)
    for run in gone:
        for i, task in enumerate(run.tasks):
            by_machine[task.machine].append((run, i))
    if not by_machine:
        return snapshot
    if made is None:
        made = {}
    machines = []
    for machine in snapshot.machines:
        tasks = by_machine.get(machine.name)
        if tasks is None:
            machines.append(machine)
            continue
        key = (machine.name, tuple((run.seq, i) for run, i in tasks))
        freed = made.get(key)
        if freed is None:
            freed = made[key] = _freed(machine, tasks)
        machines.append(freed)
    return ClusterSnapshot(machines=tuple(machines))


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
