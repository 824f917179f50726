"""One scheduler pass over one snapshot: machines read once, free capacity kept up to date."""

from __future__ import annotations

from datetime import datetime

from astraeus.shared.reasons import RejectionCode

from . import explain, gang, ladder, patience, result, survivors
from .cluster import Cluster
from .decision import Decision
from .fabrics import NetworkPlace, cluster_has_fabric_label, network_place
from .facts import Free, MachineFacts, free_idle, free_now, machine_facts
from .filters import topology
from .free_index import FreeIndex
from .model import ClusterSnapshot, Pending, Placement, RunRequest
from .needs import Needs
from .prepared import Prepared
from .rejection import Rejection
from .scores import Home, ScoreInput


class PlacementSession:
    """Built once per scheduler pass over one snapshot. It keeps an index over free capacity, so
    a single worker is placed without checking every machine, and each run's verdicts that do
    not depend on free capacity, so runs with the same ask share them. `take` records each
    placement so later `place` calls in the pass see what is left."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        views = sorted(snapshot.machines, key=lambda view: view.name)
        self._facts: tuple[MachineFacts, ...] = tuple(machine_facts(view) for view in views)
        self._index = {facts.name: i for i, facts in enumerate(self._facts)}
        self._free: list[Free] = [free_now(facts) for facts in self._facts]
        self._idle: list[Free] = [free_idle(facts) for facts in self._facts]
        self._free_index = FreeIndex(self._facts, self._free)
        self._idle_gpus = [len(free.gpu_ids) for free in self._idle]
        self._labelled = cluster_has_fabric_label([facts.report for facts in self._facts])
        self._clusters: dict[float | None, Cluster] = {None: self._build_cluster(None)}
        self._prepared: dict[tuple[object, ...], Prepared] = {}
        self._idle_views: dict[tuple[object, ...], tuple[Decision, gang.Choice | None]] = {}

    def place(
        self, run: RunRequest, now: datetime, *, exclude: frozenset[str] = frozenset()
    ) -> Placement | Pending:
        """Where the run goes now, or why it waits. `exclude` names machines held for a run
        ahead in the queue: they are unavailable to this one."""
        needs = Needs(run)
        prepared = self._prepare(needs, now, exclude)
        current = Decision(prepared, self._free, self._free_index.free_gpus)
        if not current.options:
            text = topology.no_even_split(needs.gpus)
            never = Rejection(topology.NAME, text, code=RejectionCode.CANNOT_PLAN_WORKERS)
            return explain.pending(current, current, survivors.waiting(""), now, unplannable=never)
        rungs = ladder.allowed_rungs(needs)
        choice = gang.search(current, rungs, self._free_index)
        if choice is not None:
            waiting = self._patient(current, choice, rungs, now)
            return waiting or result.placement(current, choice)
        # Held machines come free for this run once the run ahead has started: like room.
        idle, could = self._idle_view(self._prepare(needs, now, frozenset()), rungs)
        if idle.smallest.gpus != current.smallest.gpus:
            current = Decision(prepared, self._free, self._free_index.free_gpus, idle.smallest.gpus)
        survivor = survivors.gang_rejection(current, could_fit=could is not None)
        return explain.pending(current, idle, survivor, now, _names(prepared.cluster, could))

    def _idle_view(
        self, prepared: Prepared, rungs: tuple[ladder.Rung, ...]
    ) -> tuple[Decision, gang.Choice | None]:
        """The run against an idle cluster, where no machine is held for a run ahead: where it
        could go, checked at the worker its explanation uses. Idle capacity never changes in a
        pass, so runs with the same ask share it."""
        needs = prepared.needs
        key = (needs.static_key, needs.ask.model_dump_json(), needs.run.array_index, prepared.now)
        if key not in self._idle_views:
            idle = Decision(prepared, self._idle, self._idle_gpus, idle=True)
            could = gang.search(idle, rungs)
            worker = idle.explained_gpus()
            if worker != idle.smallest.gpus:
                idle = Decision(prepared, self._idle, self._idle_gpus, worker, idle=True)
            self._idle_views[key] = (idle, could)
        return self._idle_views[key]

    def take(self, placement: Placement) -> None:
        """Record the placement's GPUs, cores and memory as used for the rest of this pass."""
        for worker in placement.workers:
            i = self._index[worker.machine]
            free = self._free[i]
            free.gpu_ids.difference_update(worker.gpu_ids)
            free.cpu_cores = max(free.cpu_cores - worker.cpu_cores, 0)
            free.memory_bytes = max(free.memory_bytes - worker.memory_bytes, 0)
            self._free_index.update(i)

    def score_input(
        self, run: RunRequest, machine: str, gpus: int, now: datetime, rdma_work: bool
    ) -> ScoreInput:
        """What the score terms see for one worker of `run` with `gpus` GPUs on `machine`."""
        needs = Needs(run)
        prepared = self._prepare(needs, now, frozenset())
        decision = Decision(prepared, self._free, self._free_index.free_gpus)
        return decision.score_input(self._index[machine], gpus, rdma_work)

    def _patient(
        self, current: Decision, choice: gang.Choice, rungs: tuple[ladder.Rung, ...], now: datetime
    ) -> Pending | None:
        """A run with patience left waits while a tighter rung could hold it once idle."""
        left = patience.remaining(current.needs, now)
        tighter = rungs[: rungs.index(choice.rung)]
        if left is None or not tighter:
            return None
        idle = Decision(current.prepared, self._idle, self._idle_gpus, idle=True)
        better = gang.search(idle, tighter)
        if better is None:
            return None
        text = patience.waits_for(left, better.rung.title)
        wanted = _names(current.cluster, better)
        survivor = survivors.waiting(text)
        return explain.pending(current, idle, survivor, now, wanted, left, text)

    def _prepare(self, needs: Needs, now: datetime, exclude: frozenset[str]) -> Prepared:
        key = (needs.static_key, now, exclude)
        if key not in self._prepared:
            cluster = self._cluster(needs.min_gbps)
            self._prepared[key] = Prepared(cluster, self._free, needs, now, exclude)
        prepared = self._prepared[key]
        # Verdicts are shared, but each run keeps its own name, shape and sizes.
        return prepared if prepared.needs is needs else prepared.for_needs(needs)

    def _cluster(self, min_gbps: float | None) -> Cluster:
        if min_gbps not in self._clusters:
            self._clusters[min_gbps] = self._build_cluster(min_gbps)
        return self._clusters[min_gbps]

    def _build_cluster(self, min_gbps: float | None) -> Cluster:
        places = [network_place(facts.report, min_gbps, self._labelled) for facts in self._facts]
        members = [
            ladder.Member(f.name, f.site, f.rack, p.fabric, p.link, f.nvlink_domain)
            for f, p in zip(self._facts, places, strict=True)
        ]
        known = frozenset().union(*(facts.reported_drives for facts in self._facts))
        homes = _drive_homes(self._facts, places)
        reserved = any(r.labels for facts in self._facts for r in facts.view.reservations)
        most = max((len(facts.gpus) for facts in self._facts), default=0)
        names = [facts.name for facts in self._facts]
        capacity = [
            (f.report.cpu_cores, f.report.memory_bytes) if f.report else (0.0, 0)
            for f in self._facts
        ]
        largest = (
            max((cores for cores, _memory in capacity), default=0.0),
            max((memory for _cores, memory in capacity), default=0),
        )
        return Cluster(
            self._facts, places, members, known, homes, reserved, most, largest, names, capacity
        )


def _drive_homes(
    facts: tuple[MachineFacts, ...], places: list[NetworkPlace]
) -> dict[str, tuple[Home, ...]]:
    homes: dict[str, list[Home]] = {}
    for machine, place in zip(facts, places, strict=True):
        rdma = place.link is not None
        home = Home(machine.site, machine.rack, place.fabric, machine.nvlink_domain, rdma)
        for drive in machine.local_drives:
            homes.setdefault(drive, []).append(home)
    return {drive: tuple(found) for drive, found in homes.items()}


def _names(cluster: Cluster, choice: gang.Choice | None) -> tuple[str, ...]:
    if choice is None:
        return ()
    return tuple(cluster.facts[i].name for i in choice.machines)
