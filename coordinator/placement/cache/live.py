"""The placement state kept between scheduler passes, changed by deltas (kube-scheduler's cache).

`LiveState.update(snapshot)` compares each machine with the one it holds and reads again only
what changed: a machine whose description changed (its report as placement reads it, its state,
site, cordon or reservations) gets new facts; one whose holdings changed (a placement, a task's
end) gets a new free capacity and moves in the free index. Nothing is rebuilt for the others.
Each session (a pass, or a dry run) gets a `Frame` (what the machines are, shared, never
changed) and its own copy-on-write list of free capacity, so it may `take` freely and the state
stays as the snapshot said.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .. import ladder
from ..cluster import Cluster
from ..fabrics import NetworkPlace, cluster_has_fabric_label, network_place
from ..facts import Free, MachineFacts, free_idle, free_now, machine_facts
from ..model import ClusterSnapshot, MachineSnapshot
from .free_index import FreeIndex
from .kinds import Kind, Kinds
from .prepared import StaticVerdicts

if TYPE_CHECKING:
    from ..evaluation import RunEvaluation
    from ..gang import Choice
from ..scores import Home


class Frame:
    """What every machine is, for one generation of facts; shared by sessions, never changed
    (its clusters are filled on first use, the same for every reader)."""

    def __init__(self, facts: tuple[MachineFacts, ...], previous: Frame | None = None) -> None:
        self.facts = facts
        self.index = {one.name: i for i, one in enumerate(facts)}
        self.idle: list[Free] = [
            previous.idle[i] if previous and _kept(previous, i, one) else free_idle(one)
            for i, one in enumerate(facts)
        ]
        self.idle_gpus = [len(free.gpu_ids) for free in self.idle]
        self._kinds: Kinds = previous._kinds if previous is not None else Kinds()
        self.kinds: list[Kind] = [
            previous.kinds[i] if previous and _kept(previous, i, one) else self._kinds.of(one)
            for i, one in enumerate(facts)
        ]
        """Each machine's kind: also its free kind when idle (all of it free)."""
        self._kinds.prune(self.kinds)
        self.labelled = cluster_has_fabric_label([one.report for one in facts])
        self._places: dict[float | None, list[NetworkPlace]] = {}
        self._clusters: dict[float | None, Cluster] = {}
        self._verdicts: dict[tuple[object, ...], StaticVerdicts] = {}
        self.idle_fits: dict[
            tuple[object, ...], tuple[RunEvaluation, Choice | None, int | None]
        ] = {}
        """Runs against the idle cluster, by ask (see `PlacementSession._idle_fit`)."""
        self.timed = any(
            r.starts_at or r.ends_at for one in facts for r in one.snapshot.reservations
        )
        """Some reservation starts or ends at a time: static verdicts depend on the moment."""
        if previous is not None and previous.labelled == self.labelled:
            self._reuse(previous)

    def _reuse(self, previous: Frame) -> None:
        """Keep the network places (and idle capacity) of machines whose facts did not change."""
        if len(previous.facts) != len(self.facts):
            return
        changed = [i for i, one in enumerate(self.facts) if not _kept(previous, i, one)]
        for min_gbps, places in previous._places.items():
            mine = list(places)
            for i in changed:
                mine[i] = network_place(self.facts[i].report, min_gbps, self.labelled)
            self._places[min_gbps] = mine

    def verdicts(self, static_key: tuple[object, ...], now: datetime) -> StaticVerdicts:
        """The static verdicts of runs with this key, kept for every session of the frame (at
        this moment too, when a reservation starts or ends at a time)."""
        key = (static_key, now if self.timed else None)
        if key not in self._verdicts:
            forget_oldest(self._verdicts)
            self._verdicts[key] = StaticVerdicts()
        return self._verdicts[key]

    def cluster(self, min_gbps: float | None) -> Cluster:
        if min_gbps not in self._clusters:
            self._clusters[min_gbps] = self._build_cluster(min_gbps)
        return self._clusters[min_gbps]

    def _network(self, min_gbps: float | None) -> list[NetworkPlace]:
        if min_gbps not in self._places:
            self._places[min_gbps] = [
                network_place(facts.report, min_gbps, self.labelled) for facts in self.facts
            ]
        return self._places[min_gbps]

    def _build_cluster(self, min_gbps: float | None) -> Cluster:
        facts = self.facts
        places = self._network(min_gbps)
        members = [
            ladder.Member(f.name, f.site, f.rack, p.fabric, p.link, f.nvlink_domain, f.imex)
            for f, p in zip(facts, places, strict=True)
        ]
        known = frozenset().union(*(one.reported_drives for one in facts))
        reserved = any(r.labels for one in facts for r in one.snapshot.reservations)
        most = max((len(one.gpus) for one in facts), default=0)
        capacity = [
            (f.report.cpu_cores, f.report.memory_bytes) if f.report else (0.0, 0) for f in facts
        ]
        largest = (
            max((cores for cores, _memory in capacity), default=0.0),
            max((memory for _cores, memory in capacity), default=0),
        )
        names = [one.name for one in facts]
        homes = _drive_homes(facts, places)
        return Cluster(
            facts, places, members, known, homes, reserved, most, largest, names, capacity
        )


class LiveState:
    """Every machine's facts and free capacity, kept between passes and changed by deltas."""

    def __init__(self) -> None:
        self.frame = Frame(())
        self.free: list[Free] = []
        self.free_index = FreeIndex((), [], [])
        self._machines: list[MachineSnapshot] = []
        self.generation = 0
        """Counts the updates that changed anything; equal generations, equal state."""
        self.rebuilt = 0
        """Machines whose facts the last `update` read again (all of them after a change of
        the set of machines)."""

    def update(self, snapshot: ClusterSnapshot) -> None:
        """Bring the state to `snapshot`, reading again only the machines that changed."""
        machines = sorted(snapshot.machines, key=lambda machine: machine.name)
        if [one.name for one in machines] != [one.name for one in self._machines]:
            self._rebuild(machines)
            return
        described: list[int] = []
        used: list[int] = []
        for i, machine in enumerate(machines):
            old = self._machines[i]
            if machine is old:
                continue
            if not same_description(machine, old):
                described.append(i)
            elif not same_use(machine, old):
                used.append(i)
        self._machines = machines
        self.rebuilt = len(described)
        if not described and not used:
            return
        self.generation += 1
        if described:
            facts = list(self.frame.facts)
            for i in described:
                facts[i] = machine_facts(machines[i])
            self.frame = Frame(tuple(facts), self.frame)
        self._refree([*described, *used], rebuild=bool(described))

    def _rebuild(self, machines: list[MachineSnapshot]) -> None:
        self.generation += 1
        self.rebuilt = len(machines)
        self._machines = machines
        self.frame = Frame(tuple(machine_facts(machine) for machine in machines))
        self._refree(range(len(machines)), rebuild=True)

    def _refree(self, changed: Sequence[int], *, rebuild: bool) -> None:
        facts, machines = self.frame.facts, self._machines
        # Sessions hold copies of the list: changing this one changes none of theirs.
        free = (
            list(self.free)
            if not rebuild
            else [free_now(one, machines[i], self.frame.idle[i]) for i, one in enumerate(facts)]
        )
        if rebuild:
            self.free, self.free_index = free, FreeIndex(facts, free, self.frame.kinds)
            return
        for i in changed:
            free[i] = free_now(facts[i], machines[i], self.frame.idle[i])
        index = self.free_index.fork(facts, free, self.frame.kinds)
        for i in changed:
            index.update(i)
        self.free, self.free_index = free, index


KEPT_ASKS = 256
"""Asks whose static verdicts (and idle fits) a frame keeps: the oldest is dropped first, so
a queue of thousands of distinct asks cannot grow the state without bound."""


def forget_oldest(kept: dict[Any, Any]) -> None:
    """Make room for one more ask: drop the oldest kept one when `KEPT_ASKS` are kept."""
    if len(kept) >= KEPT_ASKS:
        del kept[next(iter(kept))]


def _kept(previous: Frame | None, i: int, facts: MachineFacts) -> bool:
    return previous is not None and i < len(previous.facts) and previous.facts[i] is facts


def same_description(machine: MachineSnapshot, old: MachineSnapshot) -> bool:
    """Whether everything a machine's facts read is the same: reports compare by their
    `report_key` when the snapshot gives one (the store's fingerprint), else whole."""
    if machine.report_key is not None and old.report_key is not None:
        same_report = machine.report_key == old.report_key
    else:
        same_report = machine.report == old.report
    return (
        same_report
        and (machine.report is None) == (old.report is None)
        and machine.state is old.state
        and machine.site == old.site
        and machine.cordon_reason == old.cordon_reason
        and machine.reservations == old.reservations
    )


def same_use(machine: MachineSnapshot, old: MachineSnapshot) -> bool:
    """Whether what live tasks hold on the machine is the same."""
    return (
        machine.used_gpu_ids == old.used_gpu_ids
        and machine.used_cpu_cores == old.used_cpu_cores
        and machine.used_memory_bytes == old.used_memory_bytes
        and machine.workers == old.workers
    )


def _drive_homes(
    facts: Sequence[MachineFacts], places: Sequence[NetworkPlace]
) -> dict[str, tuple[Home, ...]]:
    homes: dict[str, list[Home]] = {}
    for machine, place in zip(facts, places, strict=True):
        rdma = place.link is not None
        home = Home(machine.site, machine.rack, place.fabric, machine.nvlink_domain, rdma)
        for drive in machine.local_drives:
            homes.setdefault(drive, []).append(home)
    return {drive: tuple(found) for drive, found in homes.items()}
