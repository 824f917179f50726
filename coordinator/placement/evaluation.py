"""`RunEvaluation`: one run evaluated against every machine of a session, at one moment, over
one account of what is free (the session's now, or the idle cluster's). It decides nothing:
the ladder (`gang.py`) chooses, and `explanation.py` explains, from what it computes."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from functools import cached_property

from astraeus.shared import GpuHealthState, SelectionMode, labels

from . import gpu_match, scores
from .cache.cycle import CycleState
from .cache.prepared import Prepared
from .cluster import Cluster
from .facts import Free
from .filters import DYNAMIC, FREE, OTHER_DYNAMIC, OTHER_FREE, Check, first_rejection
from .needs import Needs, WorkerAsk
from .rejection import Rejection
from .shape import ShapeOption, options


class RunEvaluation:
    """One run's filters, capacities and scores over a session's machines, each computed on
    first use and kept in its `CycleState` for as long as the evaluation lives (one `place`
    call, or one ask's idle evaluation kept with the live state's frame)."""

    def __init__(
        self,
        prepared: Prepared,
        free: Sequence[Free],
        free_gpus: Sequence[int],
        free_kinds: Sequence[Hashable],
        worker_gpus: int | None = None,
        *,
        idle: bool = False,
    ) -> None:
        """`free_gpus` counts each machine's free GPUs (faulted or not, of any model): a cheap bound
        that skips machines before they are checked. `free_kinds` tells machines alike for the
        `Reads.FREE` filters (`room`, `gpus`) in `free` (`kinds.FreeKind`; on an idle cluster, each
        machine's kind): machines of one free kind share their verdicts, GPUs and caps.
        `worker_gpus` sets the worker the filters check (default: the smallest any shape has); an
        explanation checks the worker the run would really need. An `idle` evaluation looks at a
        cluster where no run holds anything, so no worker of this run is anywhere yet either."""
        self.idle = idle
        self._others = OTHER_FREE if idle else OTHER_DYNAMIC
        self.prepared, self.free, self.free_gpus = prepared, free, free_gpus
        self.free_kinds = free_kinds
        self.cluster: Cluster = prepared.cluster
        self.needs: Needs = prepared.needs
        self.options: tuple[ShapeOption, ...] = options(self.needs)
        smallest = min((option.gpus_each for option in self.options), default=self.needs.gpus)
        self.smallest: WorkerAsk = self.needs.worker(
            smallest if worker_gpus is None else worker_gpus
        )
        self.memo = memo = CycleState()
        # Bound once: read per machine in the searches' loops.
        self._rejections, self._passes, self._verdicts = memo.rejections, memo.passes, memo.verdicts
        self._supply, self._caps, self._shares = memo.supply, memo.caps, memo.shares
        self._scores, self._slots, self._holders = memo.scores, memo.slots, memo.holders
        every = self.needs.mode is SelectionMode.ALL and not self.needs.array_element
        if every and not self.needs.gpus:
            self.options = (ShapeOption(self._every_machine(), 0),)

    def rejection(self, i: int) -> Rejection | None:
        """The first filter keeping machine `i` out of the run's smallest worker, or None."""
        if i not in self._rejections:
            self._rejections[i] = (
                self.prepared.early(i) or self._dynamic(i) or self.prepared.late(i)
            )
        return self._rejections[i]

    def rejections(self, machines: Sequence[int]) -> list[Rejection | None]:
        """`rejection(i)` of each machine, in one loop: an explanation asks it of every
        machine, and at 20,000 of them the calls would cost more than the verdicts."""
        if self.needs.gpu_requests.ids:
            return [self.rejection(i) for i in machines]
        early, late = self.prepared.early, self.prepared.late
        verdicts, free_kinds, free = self._verdicts, self.free_kinds, self.free
        run = None if self.idle else self.needs.run.key
        found: list[Rejection | None] = []
        for i in machines:
            rejection = early(i)
            if rejection is None:
                # `_dynamic`, inlined.
                key = (run is not None and run in free[i].workers, free_kinds[i])
                rejection = verdicts.get(key, _UNSEEN)
                if rejection is _UNSEEN:
                    rejection = verdicts[key] = self._dynamic_check(i)
                if rejection is None:
                    rejection = late(i)
            found.append(rejection)
        return found

    def _dynamic(self, i: int) -> Rejection | None:
        """The filters that read where the run is or what is free (`Reads.RUN`, `Reads.FREE`:
        `spread`, `room`, `gpus`). For a fixed run and worker their verdict depends only on the
        machine's free kind and whether a worker of the run is here, and many machines share both,
        so each verdict is decided once, on the first machine found in it."""
        if self.needs.gpu_requests.ids:
            return self._dynamic_check(i)
        here = not self.idle and self.needs.run.key in self.free[i].workers
        key = (here, self.free_kinds[i])
        verdict = self._verdicts.get(key, _UNSEEN)
        if verdict is _UNSEEN:
            verdict = self._verdicts[key] = self._dynamic_check(i)
        return verdict

    def _dynamic_check(self, i: int) -> Rejection | None:
        return first_rejection(self._check(i), FREE if self.idle else DYNAMIC)

    def _check(self, i: int) -> Check:
        return Check(
            needs=self.needs,
            facts=self.cluster.facts[i],
            free=self.free[i],
            worker=self.smallest,
            now=self.prepared.now,
            place=self.cluster.places[i],
            known_supply=self.supply(i) if self.needs.gpus else None,
        )

    def passes(self, i: int) -> bool:
        """No filter rejects machine `i`: `rejection(i) is None`, without writing the reason."""
        if i not in self._passes:
            self._passes[i] = self._passes_now(i)
        return self._passes[i]

    def _passes_now(self, i: int) -> bool:
        prepared, needs = self.prepared, self.needs
        if self.free_gpus[i] < self.smallest.gpus or prepared.early(i) is not None:
            return False
        if needs.gpu_requests.ids:
            return self.rejection(i) is None
        if not self.idle and needs.run.key in self.free[i].workers:
            return self.rejection(i) is None
        if self.cap(i) < max(self.smallest.gpus, 1 if needs.gpus == 0 else 0):
            return False
        if self._others and self._other(i) is not None:
            return False
        return prepared.late(i) is None

    def _other(self, i: int) -> Rejection | None:
        """The dynamic filters besides those `passes` decides apart, once per free kind (no
        worker of the run is here: else every filter runs)."""
        key = self.free_kinds[i]
        if key not in self.memo.others:
            check = self._check(i)
            self.memo.others[key] = first_rejection(check, self._others)
        return self.memo.others[key]

    def _every_machine(self) -> int:
        """`mode: All`: one worker on every machine that can take one, in the site with most."""
        sites = Counter(self.cluster.facts[i].site for i in self.eligible)
        return max(sites.values(), default=1)

    @cached_property
    def eligible(self) -> list[int]:
        """Machines no filter rejects, in name order."""
        return [i for i in range(len(self.free)) if self.passes(i)]

    def explained_gpus(self) -> int | None:
        """The worker an explanation checks (call on an idle evaluation): the smallest of any
        shape that enough machines could hold if idle. None when no shape could: each machine
        is then judged against its own part of the shapes (`share`), never against the whole
        run in one worker."""
        # Workers that stack: the fewest-workers shape first, so a machine that could hold the
        # whole run alone is checked for all of it.
        order = self.options if self.needs.stacks else sorted(self.options, key=_each)
        for option in order:
            holders = sum(self.slots(i, option) for i in self.eligible)
            if holders >= option.tasks:
                return option.gpus_each
            self._holders[option] = holders
        return None

    def nearest_shape(self) -> ShapeOption | None:
        """The shape the idle cluster comes nearest to holding, when it holds none (call after
        `explained_gpus` answered None): the largest part of its workers the machines could
        hold, then the fewest workers."""
        held = self._holders
        return max(held, key=lambda one: (held[one] / one.tasks, -one.tasks), default=None)

    def share(self, i: int) -> int:
        """Machine `i`'s part of the run when no shape fits the idle cluster (call on an idle
        evaluation): the largest worker of an allowed shape it could hold idle (its GPUs of the
        kind asked, at risk or not, with all its cores and memory), else the smallest worker
        any shape has, so it tells why it cannot take even that."""
        key = self.free_kinds[i]
        if key not in self._shares:
            sizes = sorted({option.gpus_each for option in self.options})
            most = sizes[0] if sizes else 0
            if len(sizes) > 1:
                free = self.free[i]
                usable = self.supply(i).usable
                most = self.needs.most_gpus(usable, free.cpu_cores, free.memory_bytes)
            self._shares[key] = max(
                (size for size in sizes if size <= most), default=self.smallest.gpus
            )
        return self._shares[key]

    @cached_property
    def workspace(self) -> list[int]:
        """The machines (indices, in name order) of the run's workspace's pools; all of them
        for a workspace without pools. An explanation checks these only."""
        pools, facts = self.needs.run.pools, self.cluster.facts
        if not pools:
            return list(range(len(facts)))
        return [i for i, one in enumerate(facts) if one.snapshot.labels.get(labels.POOL) in pools]

    @cached_property
    def workspace_gpus(self) -> int:
        """The GPUs of the kind asked (at risk or not, never faulted) on the workspace's
        machines, free or not: all the run could ever get."""
        return sum(self.supply(i).usable for i in self.workspace)

    def cap(self, i: int) -> int:
        """The most GPUs one worker of this run can get on machine `i` (1 for a CPU worker)."""
        key = self.free_kinds[i]
        if key not in self._caps:
            self._caps[key] = self._cap(i)
        return self._caps[key]

    def _cap(self, i: int) -> int:
        needs, free = self.needs, self.free[i]
        if needs.gpus == 0:
            return 1 if needs.fits(0, free.cpu_cores, free.memory_bytes) else 0
        if needs.gpu_requests.ids:
            return needs.gpus
        usable = self.supply(i).free(needs.gpu_requests.healthy_only)
        return needs.most_gpus(usable, free.cpu_cores, free.memory_bytes)

    def slots(self, i: int, option: ShapeOption) -> int:
        """How many workers of `option` machine `i` can take now (call for machines that pass):
        one at most unless workers stack, else as many as its free GPUs, cores and memory hold,
        up to the run's workers."""
        key = (i, option)
        if key not in self._slots:
            self._slots[key] = self._slots_now(i, option)
        return self._slots[key]

    def _slots_now(self, i: int, option: ShapeOption) -> int:
        each, needs = option.gpus_each, self.needs
        if self.cap(i) < max(each, 1 if needs.gpus == 0 else 0):
            return 0
        if not needs.stacks:
            return 1
        free, worker = self.free[i], needs.worker(each)
        most = option.tasks
        if each:
            most = min(most, self.supply(i).free(needs.gpu_requests.healthy_only) // each)
        if worker.cpu_cores:
            most = min(most, math.floor(free.cpu_cores / worker.cpu_cores))
        if worker.memory_bytes:
            most = min(most, free.memory_bytes // worker.memory_bytes)
        # Settled by the same sums the machine's ledger will make, so both always agree.
        cores, memory = worker.cpu_cores, worker.memory_bytes
        while most > 1 and (most * cores > free.cpu_cores or most * memory > free.memory_bytes):
            most -= 1
        return max(most, 1)

    def room_free(self, i: int) -> float:
        """What a group's machine has free, in the run's unit: usable GPUs, or cores."""
        if self.needs.gpus == 0:
            return self.free[i].cpu_cores
        return self.supply(i).free(self.needs.gpu_requests.healthy_only)

    def supply(self, i: int) -> gpu_match.Supply:
        """Machine `i`'s GPUs of the asked kind, counted once per free kind."""
        key = self.free_kinds[i]
        if key not in self._supply:
            self._supply[key] = gpu_match.supply(self.prepared.matched(i), self.free[i].gpu_ids)
        return self._supply[key]

    def gpus_for(self, i: int, count: int) -> tuple[tuple[str, ...], int]:
        """The GPU UUIDs a worker with `count` GPUs gets on machine `i`, and how many at risk."""
        if count == 0:
            return (), 0
        ids = self.needs.gpu_requests.ids
        if ids:
            gpus = [self.cluster.facts[i].gpu_by_id[gpu_id] for gpu_id in ids]
            at_risk = sum(gpu.health.state is GpuHealthState.AT_RISK for gpu in gpus)
            return tuple(gpu.uuid for gpu in gpus), at_risk
        return gpu_match.take(self.prepared.matched(i), self.free[i].gpu_ids, count)

    def score_input(self, i: int, gpus: int, rdma_work: bool) -> scores.ScoreInput:
        _ids, at_risk = self.gpus_for(i, gpus)
        return scores.ScoreInput(
            needs=self.needs,
            facts=self.cluster.facts[i],
            free=self.free[i],
            worker=self.needs.worker(gpus),
            place=self.cluster.places[i],
            now=self.prepared.now,
            at_risk_taken=at_risk,
            rdma_work=rdma_work or self.needs.asks_rdma,
            drive_homes=self.cluster.drive_homes,
        )

    def score(self, i: int, gpus: int, rdma_work: bool) -> int:
        key = (i, gpus, rdma_work)
        if key not in self._scores:
            self._scores[key] = scores.total(self.score_input(i, gpus, rdma_work))
        return self._scores[key]


_UNSEEN = Rejection(filter="", reason="", code="")
"""Marks a verdict not decided yet (None is a verdict: no filter rejects)."""


def _each(option: ShapeOption) -> int:
    return option.gpus_each
