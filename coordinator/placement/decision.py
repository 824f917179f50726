"""One run against every machine of a session, at one moment, over one view of what is free."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property

from . import gpu_match, scores
from .fabrics import NetworkPlace
from .facts import Free, MachineFacts
from .filters import Check, first_rejection
from .ladder import Member
from .needs import Needs, WorkerAsk
from .rejection import Rejection
from .scores import Home
from .shape import ShapeOption, options


@dataclass(frozen=True)
class Cluster:
    """What a decision reads from its session: machines, the network for this run, drives."""

    facts: Sequence[MachineFacts]
    places: Sequence[NetworkPlace]
    members: Sequence[Member]
    known_drives: frozenset[str]
    drive_homes: dict[str, tuple[Home, ...]]


class Decision:
    """Filters, capacities and scores for one run, computed once per machine and kept."""

    def __init__(
        self,
        cluster: Cluster,
        free: Sequence[Free],
        needs: Needs,
        now: datetime,
        held: frozenset[str] = frozenset(),
        worker_gpus: int | None = None,
    ) -> None:
        """`worker_gpus` sets the worker the filters check (default: the smallest any shape
        has); an explanation checks the worker the run would really need."""
        self.cluster, self.free, self.needs, self.now, self.held = cluster, free, needs, now, held
        self.options: tuple[ShapeOption, ...] = options(needs)
        smallest = min((option.gpus_each for option in self.options), default=needs.gpus)
        self.smallest: WorkerAsk = needs.worker(smallest if worker_gpus is None else worker_gpus)
        self._rejections: dict[int, Rejection | None] = {}
        self._caps: dict[int, int] = {}
        self._scores: dict[tuple[int, int, bool], int] = {}

    def check(self, i: int) -> Check:
        facts = self.cluster.facts[i]
        return Check(
            needs=self.needs,
            facts=facts,
            free=self.free[i],
            worker=self.smallest,
            now=self.now,
            place=self.cluster.places[i],
            held=facts.name in self.held,
            known_drives=self.cluster.known_drives,
        )

    def rejection(self, i: int) -> Rejection | None:
        """The first filter keeping machine `i` out of the run's smallest worker, or None."""
        if i not in self._rejections:
            self._rejections[i] = first_rejection(self.check(i))
        return self._rejections[i]

    @cached_property
    def eligible(self) -> list[int]:
        """Machines no filter rejects, in name order."""
        return [i for i in range(len(self.cluster.facts)) if self.rejection(i) is None]

    def explained_gpus(self) -> int:
        """The worker an explanation checks: the smallest of any shape that enough machines
        could hold if idle (call on an idle decision); else that of the fewest-machines shape."""
        for option in sorted(self.options, key=lambda option: option.gpus_each):
            holders = sum(self.cap(i) >= option.gpus_each for i in self.eligible)
            if holders >= option.tasks:
                return option.gpus_each
        return self.options[0].gpus_each if self.options else self.needs.gpus

    def cap(self, i: int) -> int:
        """The most GPUs one worker of this run can get on machine `i` (1 for a CPU worker)."""
        if i not in self._caps:
            self._caps[i] = self._cap(i)
        return self._caps[i]

    def _cap(self, i: int) -> int:
        needs, free = self.needs, self.free[i]
        if needs.gpus == 0:
            return 1
        if needs.gpu_requests.ids:
            return needs.gpus
        room = needs.most_gpus(free.cpu_cores, free.memory_bytes)
        return min(self.supply(i).free(needs.gpu_requests.healthy_only), room)

    def room_free(self, i: int) -> float:
        """What a group's machine has free, in the run's unit: usable GPUs, or cores."""
        if self.needs.gpus == 0:
            return self.free[i].cpu_cores
        return self.supply(i).free(self.needs.gpu_requests.healthy_only)

    def supply(self, i: int) -> gpu_match.Supply:
        return gpu_match.supply(
            self.needs.gpu_requests, self.cluster.facts[i].gpus, self.free[i].gpu_ids
        )

    def gpus_for(self, i: int, count: int) -> tuple[tuple[str, ...], int]:
        """The GPU UUIDs a worker with `count` GPUs gets on machine `i`, and how many at risk."""
        if count == 0:
            return (), 0
        ids = self.needs.gpu_requests.ids
        if ids:
            gpus = [self.cluster.facts[i].gpu_by_id[gpu_id] for gpu_id in ids]
            at_risk = sum(gpu.health.state.value == "at_risk" for gpu in gpus)
            return tuple(gpu.uuid for gpu in gpus), at_risk
        return gpu_match.take(self.supply(i), count)

    def score_input(self, i: int, gpus: int, rdma_work: bool) -> scores.ScoreInput:
        _ids, at_risk = self.gpus_for(i, gpus)
        return scores.ScoreInput(
            needs=self.needs,
            facts=self.cluster.facts[i],
            free=self.free[i],
            worker=self.needs.worker(gpus),
            place=self.cluster.places[i],
            now=self.now,
            at_risk_taken=at_risk,
            rdma_work=rdma_work or self.needs.asks_rdma,
            drive_homes=self.cluster.drive_homes,
        )

    def score(self, i: int, gpus: int, rdma_work: bool) -> int:
        key = (i, gpus, rdma_work)
        if key not in self._scores:
            self._scores[key] = scores.total(self.score_input(i, gpus, rdma_work))
        return self._scores[key]
