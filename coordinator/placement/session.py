"""One scheduler pass over one snapshot: machines read once, free capacity kept up to date."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from astraeus.shared.reasons import RejectionCode

from . import assemble, explanation, gang, ladder, patience, survivors
from .cache.live import LiveState, forget_oldest
from .cache.prepared import Prepared
from .cache.snapshot import SessionCache
from .cluster import Cluster
from .evaluation import RunEvaluation
from .facts import MachineFacts
from .filters import topology
from .model import ClusterSnapshot, Pending, Placement, RunRequest
from .needs import Needs
from .rejection import Rejection
from .scores import ScoreInput


class PlacementSession:
    """One scheduler pass (or dry run) over the live state: what the machines are is shared
    with every other session of the same generation; what is free is this session's own copy,
    which `take` shrinks so later `place` calls in the pass see what is left. Each run's
    verdicts that do not depend on free capacity are kept, so runs with the same ask share
    them. `PlacementSession(snapshot)` builds a live state of its own;
    `PlacementSession(live=live)` reads one kept between passes."""

    def __init__(self, snapshot: ClusterSnapshot | None = None, *, live: LiveState | None = None):
        if live is None:
            live = LiveState()
            live.update(snapshot or ClusterSnapshot(machines=()))
        self._cache = SessionCache(live)
        frame = self._frame = self._cache.frame
        self._facts: tuple[MachineFacts, ...] = frame.facts
        self._index = frame.index
        self._free, self._free_index = self._cache.free, self._cache.free_index
        self._idle, self._idle_gpus = frame.idle, frame.idle_gpus
        self._idle_fits = frame.idle_fits

    def place(
        self, run: RunRequest, now: datetime, *, exclude: frozenset[str] = frozenset()
    ) -> Placement | Pending:
        """Where the run goes now, or why it waits. `exclude` names machines held for a run
        ahead in the queue: they are unavailable to this one."""
        needs = Needs(run)
        prepared = self._prepare(needs, now, exclude)
        current = self._evaluation(prepared)
        if not current.options:
            text = topology.no_even_split(needs.gpus)
            never = Rejection(
                filter=topology.NAME, reason=text, code=RejectionCode.CANNOT_PLAN_WORKERS
            )
            return explanation.pending(
                current, current, survivors.waiting(""), now, unplannable=never
            )
        rungs = ladder.allowed_rungs(needs)
        choice = gang.search(current, rungs, self._free_index)
        if choice is not None:
            waiting = self._patient(current, choice, rungs, now)
            return waiting or assemble.build_placement(current, choice)
        # Held machines come free for this run once the run ahead has started: like room. So
        # the idle cluster has no hold, and a held machine shows what else keeps it out.
        unheld = self._prepare(needs, now, frozenset())
        idle, could, explained = self._idle_fit(unheld, rungs)
        if could is None:
            return self._never_fits(unheld, idle, explained is None, now)
        if idle.smallest.gpus != current.smallest.gpus:
            current = self._evaluation(prepared, idle.smallest.gpus)
        survivor = survivors.gang_rejection(current, could_fit=True, idle=idle)
        wanted = _names(prepared.cluster, could)
        free = self._unheld(prepared, unheld, current.smallest.gpus)
        return explanation.pending(current, idle, survivor, now, wanted, unheld=free)

    def _never_fits(
        self, prepared: Prepared, idle: RunEvaluation, by_machine: bool, now: datetime
    ) -> Pending:
        """Why a run that even the idle cluster cannot hold waits. Nothing held for a run ahead
        keeps it out, so no hold is shown. When no shape could be held, each machine is judged
        against its own part of the shapes automatic shape would try (`RunEvaluation.share`),
        never against the whole run in one worker; and when the workspace's machines have too
        few GPUs of the kind asked between them, that is the headline, and the reason of every
        machine that could take its part if idle."""
        current = self._evaluation(prepared, idle.smallest.gpus)
        needs = prepared.needs
        matching = idle.workspace_gpus if needs.gpus and not needs.gpu_requests.ids else 0
        if by_machine and 0 < matching < needs.gpus:
            # Judged as if idle: no room frees up to change it, so no room reason is shown.
            text = topology.too_few_in_workspace(matching, needs.gpus)
            survivor = survivors.too_small(text)
            return explanation.pending(
                current, idle, survivor, now, judge=idle.rejections, too_small=text
            )
        if not by_machine:
            survivor = survivors.gang_rejection(current, could_fit=False, idle=idle)
            return explanation.pending(current, idle, survivor, now)
        survivor = survivors.gang_rejection(
            current, could_fit=False, shape=idle.nearest_shape(), idle=idle
        )
        judge = _ByShare(idle, current, lambda gpus: self._evaluation(prepared, gpus))
        return explanation.pending(current, idle, survivor, now, judge=judge)

    def _unheld(self, prepared: Prepared, unheld: Prepared, gpus: int) -> RunEvaluation | None:
        """The run against what is free now without the holds for a run ahead, when some
        machine is held: what else keeps a held machine out."""
        if not prepared.held:
            return None
        return self._evaluation(unheld, gpus)

    def _idle_fit(
        self, prepared: Prepared, rungs: tuple[ladder.Rung, ...]
    ) -> tuple[RunEvaluation, gang.Choice | None, int | None]:
        """The run against an idle cluster, where no machine is held for a run ahead: where it
        could go, and the worker its explanation checks (`RunEvaluation.explained_gpus`: None
        when no shape fits it), the evaluation made at that worker. Idle capacity never changes
        in a pass, so runs with the same ask share it, and it is kept with the live state's
        frame for later sessions too (what is idle changes only with what machines are)."""
        needs = prepared.needs
        moment = prepared.now if self._frame.timed else None
        key = (needs.static_key, needs.ask.model_dump_json(), needs.run.array_index, moment)
        if key not in self._idle_fits:
            idle = self._idle_evaluation(prepared)
            could = gang.search(idle, rungs)
            worker = idle.explained_gpus()
            if worker is not None and worker != idle.smallest.gpus:
                idle = self._idle_evaluation(prepared, worker)
            forget_oldest(self._idle_fits)
            self._idle_fits[key] = (idle, could, worker)
        return self._idle_fits[key]

    def idle_machines(
        self, run: RunRequest, now: datetime, exclude: frozenset[str]
    ) -> tuple[str, ...]:
        """The machines the run would use on an idle cluster without the `exclude`d ones; ()
        when none would hold it. The scheduler asks it for a head, to find the machines that
        free up first: the result depends on the exclusion, so it is not kept with the ask's
        idle fit (`_idle_fits`). An excluded machine counts as one without GPUs, so the search
        passes it over at its first check (a head's search excludes most of the cluster), and
        groups are judged machine by machine (classes of alike machines do not see which are
        left out); a run without GPUs leaves them out as machines held for a run ahead."""
        needs = Needs(run)
        rungs = ladder.allowed_rungs(needs)
        if not needs.gpus:
            held = self._prepare(needs, now, exclude)
            return _names(held.cluster, gang.search(self._idle_evaluation(held), rungs))
        prepared = self._prepare(needs, now, frozenset())
        names = prepared.cluster.names
        gpus = [0 if name in exclude else n for name, n in zip(names, self._idle_gpus, strict=True)]
        kinds = self._frame.kinds
        evaluation = RunEvaluation(prepared, self._idle, gpus, kinds, idle=True)
        return _names(prepared.cluster, gang.reference_search(evaluation, rungs))

    def take(self, placement: Placement) -> None:
        """Record the placement's GPUs, cores and memory as used for the rest of this pass."""
        for worker in placement.workers:
            i = self._index[worker.machine]
            self._cache.take(i, worker.gpu_ids, worker.cpu_cores, worker.memory_bytes)

    def score_input(
        self, run: RunRequest, machine: str, gpus: int, now: datetime, rdma_work: bool
    ) -> ScoreInput:
        """What the score terms see for one worker of `run` with `gpus` GPUs on `machine`."""
        needs = Needs(run)
        prepared = self._prepare(needs, now, frozenset())
        evaluation = self._evaluation(prepared)
        return evaluation.score_input(self._index[machine], gpus, rdma_work)

    def _patient(
        self,
        current: RunEvaluation,
        choice: gang.Choice,
        rungs: tuple[ladder.Rung, ...],
        now: datetime,
    ) -> Pending | None:
        """A run with patience left waits while a tighter rung could hold it once idle."""
        left = patience.remaining(current.needs, now)
        tighter = rungs[: rungs.index(choice.rung)]
        if left is None or not tighter:
            return None
        idle = self._idle_evaluation(current.prepared)
        better = gang.search(idle, tighter)
        if better is None:
            return None
        text = patience.waits_for(left, better.rung.title)
        wanted = _names(current.cluster, better)
        survivor = survivors.waiting(text)
        unheld = self._prepare(current.needs, now, frozenset())
        free = self._unheld(current.prepared, unheld, current.smallest.gpus)
        return explanation.pending(current, idle, survivor, now, wanted, left, text, unheld=free)

    def _evaluation(self, prepared: Prepared, worker_gpus: int | None = None) -> RunEvaluation:
        """The run against what is free in this session now."""
        index = self._free_index
        return RunEvaluation(prepared, self._free, index.free_gpus, index.free_kinds, worker_gpus)

    def _idle_evaluation(self, prepared: Prepared, worker_gpus: int | None = None) -> RunEvaluation:
        """The run against the idle cluster, where each machine's free kind is its kind."""
        kinds = self._frame.kinds
        return RunEvaluation(prepared, self._idle, self._idle_gpus, kinds, worker_gpus, idle=True)

    def _prepare(self, needs: Needs, now: datetime, exclude: frozenset[str]) -> Prepared:
        return self._cache.prepared(needs, now, exclude)


def _names(cluster: Cluster, choice: gang.Choice | None) -> tuple[str, ...]:
    if choice is None:
        return ()
    return tuple(cluster.facts[i].name for i in choice.machines)


class _ByShare:
    """Each machine judged against its own part of the run (`RunEvaluation.share`), for a run
    no shape of which the idle cluster could hold: first against the smallest worker any shape
    has (what keeps it out of every shape), then against its share, whose verdict counts when
    it is not about room (room matters only to a run that could fit once others end)."""

    def __init__(
        self,
        idle: RunEvaluation,
        current: RunEvaluation,
        at: Callable[[int], RunEvaluation],
    ) -> None:
        """`current` checks the smallest worker; `at(gpus)` makes the run's evaluation now for
        a worker of that size."""
        self._idle, self._current, self._make = idle, current, at

    def __call__(self, machines: list[int]) -> list[Rejection | None]:
        found = self._current.rejections(machines)
        smallest = self._current.smallest.gpus
        by_share: dict[int, list[int]] = {}
        for k, (i, rejection) in enumerate(zip(machines, found, strict=True)):
            if rejection is None:
                share = self._idle.share(i)
                if share != smallest:
                    by_share.setdefault(share, []).append(k)
        for share, positions in by_share.items():
            judged = self._make(share).rejections([machines[k] for k in positions])
            for k, rejection in zip(positions, judged, strict=True):
                if rejection is not None and not rejection.room:
                    found[k] = rejection
        return found
