"""A single worker goes to the machine with the highest score, ties by name, found without
scoring every machine: classes of machines alike in GPUs, cores and memory (free and in all) are
visited in order of an upper bound of their score, each class's exact bound is computed once,
and the search stops once no machine left could beat the best found."""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator

from .cache.free_index import Bucket, Capacity, Entry, FreeIndex
from .evaluation import RunEvaluation
from .needs import WorkerAsk
from .scores import at_risk, cores_free, cpu_only, drive_here, memory_free, packing, reserved_labels


def best(evaluation: RunEvaluation, index: FreeIndex, gpus: int) -> int | None:
    """The machine a single worker with `gpus` GPUs goes to, or None when none can take it."""
    bonus = _bonus_bound(evaluation)
    streams = [
        _bounds(bucket, entries, packing.of(*bucket, gpus) + cpu_only.of(bucket.gpus, gpus))
        for bucket, entries in index.buckets.items()
        if bucket.free_gpus >= gpus
    ]
    worker = evaluation.needs.worker(gpus)
    slack = _least_use(evaluation, worker)
    found: tuple[int, int] | None = None
    for negative, capacity, bucket in heapq.merge(*streams):
        # Scores are whole: a bound's fraction can never be reached.
        if found is not None and math.floor(-negative - slack) + bonus < found[0]:
            break
        if _too_small(capacity, bucket, worker):
            continue
        members = index.classes[(bucket, capacity)]
        # Alike for the exact bound: one check per class, not per machine.
        most = _exact_bound(evaluation, members[0], worker) + bonus + _risk(capacity, bucket, gpus)
        for i in members:
            if found is not None and (most, -i) < found:
                break  # the rest of the class has later names: none can win a tie
            if not evaluation.passes(i) or evaluation.cap(i) < gpus:
                continue
            rank = (evaluation.score(i, gpus, False), -i)
            if found is None or rank > found:
                found = rank
    return None if found is None else -found[1]


def _too_small(capacity: Capacity, bucket: Bucket, worker: WorkerAsk) -> bool:
    """No machine of the class can take the worker: too few free GPUs that are not faulted,
    or too few free cores or too little free memory."""
    if bucket.free_gpus - capacity.faulted_free < worker.gpus:
        return True
    return (
        worker.cpu_cores > capacity.free_cpu_cores
        or worker.memory_bytes > capacity.free_memory_bytes
    )


def _risk(capacity: Capacity, bucket: Bucket, gpus: int) -> int:
    """The at-risk term at best: healthy GPUs are taken first, so only those the free healthy
    ones cannot cover are at risk (pinned or model-matched GPUs can only take more)."""
    healthy = bucket.free_gpus - capacity.faulted_free - capacity.at_risk_free
    return at_risk.PER_GPU * max(gpus - healthy, 0)


def _least_use(evaluation: RunEvaluation, worker: WorkerAsk) -> float:
    """What the worker's cores and memory take off the cores- and memory-free terms on any
    machine at least: on the largest machine."""
    cores, memory = evaluation.cluster.most_capacity
    used = cores_free.MOST * worker.cpu_cores / cores if cores else 0.0
    return used + (memory_free.MOST * worker.memory_bytes / memory if memory else 0.0)


def _exact_bound(evaluation: RunEvaluation, i: int, worker: WorkerAsk) -> int:
    """The packing, CPU-only, cores and memory terms exactly: cheap, and no filter run."""
    facts, free = evaluation.cluster.facts[i], evaluation.free[i]
    report = facts.report
    if report is None:
        return 0
    total = len(facts.gpus)
    return (
        packing.of(total, len(free.gpu_ids), worker.gpus)
        + cpu_only.of(total, worker.gpus)
        + cores_free.of(report.cpu_cores, free.cpu_cores, worker.cpu_cores)
        + memory_free.of(report.memory_bytes, free.memory_bytes, worker.memory_bytes)
    )


def _bounds(
    bucket: Bucket, entries: list[Entry], base: int
) -> Iterator[tuple[float, Capacity, Bucket]]:
    # Negated bounds ascend as the negated headroom does: heapq.merge yields the best first.
    return ((negative_room - base, capacity, bucket) for negative_room, capacity in entries)


def _bonus_bound(evaluation: RunEvaluation) -> int:
    """The most the other positive terms (label reservations, drives) could add anywhere."""
    bonus = drive_here.PER_DRIVE * len(evaluation.needs.ask.drives)
    if evaluation.cluster.label_reservations:
        bonus += reserved_labels.POINTS
    return bonus
