"""One scheduler pass over one snapshot: machines read once, free capacity kept up to date."""

from __future__ import annotations

from datetime import datetime

from . import explain, gang, ladder, patience, result, survivors
from .decision import Cluster, Decision
from .fabrics import NetworkPlace, cluster_has_fabric_label, network_place
from .facts import Free, MachineFacts, free_idle, free_now, machine_facts
from .model import ClusterSnapshot, Pending, Placement, RunRequest
from .needs import Needs
from .scores import Home, ScoreInput


class PlacementSession:
    """Built once per scheduler pass over one snapshot; `take` records each placement so later
    `place` calls in the pass see what is left."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        views = sorted(snapshot.machines, key=lambda view: view.name)
        self._facts: tuple[MachineFacts, ...] = tuple(machine_facts(view) for view in views)
        self._index = {facts.name: i for i, facts in enumerate(self._facts)}
        self._free: list[Free] = [free_now(facts) for facts in self._facts]
        self._idle: list[Free] = [free_idle(facts) for facts in self._facts]
        self._labelled = cluster_has_fabric_label([facts.report for facts in self._facts])
        self._clusters: dict[float | None, Cluster] = {}

    def place(
        self, run: RunRequest, now: datetime, *, exclude: frozenset[str] = frozenset()
    ) -> Placement | Pending:
        """Where the run goes now, or why it waits. `exclude` names machines held for a run
        ahead in the queue: they are unavailable to this one."""
        needs = Needs(run)
        cluster = self._cluster(needs.min_gbps)
        current = Decision(cluster, self._free, needs, now, exclude)
        rungs = ladder.allowed_rungs(needs)
        choice = gang.search(current, rungs)
        idle = Decision(cluster, self._idle, needs, now, exclude)
        if choice is not None:
            return self._patient(current, idle, choice, rungs, now) or result.placement(
                current, choice
            )
        could = gang.search(idle, rungs)
        wanted = _names(cluster, could)
        worker = idle.explained_gpus()
        if worker != current.smallest.gpus:
            current = Decision(cluster, self._free, needs, now, exclude, worker)
            idle = Decision(cluster, self._idle, needs, now, exclude, worker)
        survivor = survivors.gang_rejection(current, could_fit=could is not None)
        return explain.pending(current, idle, survivor, now, wanted)

    def score_input(
        self, run: RunRequest, machine: str, gpus: int, now: datetime, rdma_work: bool
    ) -> ScoreInput:
        """What the score terms see for one worker of `run` with `gpus` GPUs on `machine`."""
        needs = Needs(run)
        decision = Decision(self._cluster(needs.min_gbps), self._free, needs, now)
        return decision.score_input(self._index[machine], gpus, rdma_work)

    def take(self, placement: Placement) -> None:
        """Record the placement's GPUs, cores and memory as used for the rest of this pass."""
        for worker in placement.workers:
            free = self._free[self._index[worker.machine]]
            free.gpu_ids.difference_update(worker.gpu_ids)
            free.cpu_cores = max(free.cpu_cores - worker.cpu_cores, 0)
            free.memory_bytes = max(free.memory_bytes - worker.memory_bytes, 0)

    def _patient(
        self,
        current: Decision,
        idle: Decision,
        choice: gang.Choice,
        rungs: tuple[ladder.Rung, ...],
        now: datetime,
    ) -> Pending | None:
        """A run with patience left waits while a tighter rung could hold it once idle."""
        left = patience.remaining(current.needs, now)
        tighter = rungs[: rungs.index(choice.rung)]
        if left is None or not tighter:
            return None
        better = gang.search(idle, tighter)
        if better is None:
            return None
        text = patience.waits_for(left, better.rung.title)
        survivor = survivors.waiting(text)
        wanted = _names(current.cluster, better)
        return explain.pending(current, idle, survivor, now, wanted, left, text)

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
        known = frozenset().union(*(facts.reachable_drives for facts in self._facts))
        return Cluster(self._facts, places, members, known, _drive_homes(self._facts, places))


def _drive_homes(
    facts: tuple[MachineFacts, ...], places: list[NetworkPlace]
) -> dict[str, tuple[Home, ...]]:
    homes: dict[str, list[Home]] = {}
    for machine, place in zip(facts, places, strict=True):
        home = Home(
            machine.site, machine.rack, place.fabric, machine.nvlink_domain, bool(place.link)
        )
        for drive in machine.local_drives:
            homes.setdefault(drive, []).append(home)
    return {drive: tuple(found) for drive, found in homes.items()}


def _names(cluster: Cluster, choice: gang.Choice | None) -> tuple[str, ...]:
    if choice is None:
        return ()
    return tuple(cluster.facts[i].name for i in choice.machines)
