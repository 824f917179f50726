"""A single worker goes to the machine with the highest score, ties by name, found without
scoring every machine: machines are visited in order of an upper bound of their score, and the
search stops once no machine left could beat the best found."""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from .decision import Decision
from .free_index import FreeIndex
from .needs import WorkerAsk
from .scores import cores_free, cpu_only, drive_here, memory_free, packing, reserved_labels


def best(decision: Decision, index: FreeIndex, gpus: int) -> int | None:
    """The machine a single worker with `gpus` GPUs goes to, or None when none can take it."""
    bonus = _bonus_bound(decision)
    streams = [
        _bounds(entries, packing.of(total, free, gpus) + cpu_only.of(total, gpus))
        for (total, free), entries in index.buckets.items()
        if free >= gpus
    ]
    worker = decision.needs.worker(gpus)
    found: tuple[int, int] | None = None
    for negative, i in heapq.merge(*streams):
        if found is not None and bonus - negative < found[0]:
            break
        if found is not None and _exact_bound(decision, i, worker) + bonus < found[0]:
            continue
        if not decision.passes(i) or decision.cap(i) < gpus:
            continue
        rank = (decision.score(i, gpus, False), -i)
        if found is None or rank > found:
            found = rank
    return None if found is None else -found[1]


def _exact_bound(decision: Decision, i: int, worker: WorkerAsk) -> int:
    """The packing, CPU-only, cores and memory terms exactly: cheap, and no filter run."""
    facts, free = decision.cluster.facts[i], decision.free[i]
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


def _bounds(entries: list[tuple[float, int]], base: int) -> Iterator[tuple[float, int]]:
    # Negated bounds ascend as the negated headroom does: heapq.merge yields the best first.
    return ((negative_room - base, i) for negative_room, i in entries)


def _bonus_bound(decision: Decision) -> int:
    """The most the other positive terms (label reservations, drives) could add anywhere."""
    bonus = drive_here.PER_DRIVE * len(decision.needs.ask.drives)
    if decision.cluster.label_reservations:
        bonus += reserved_labels.POINTS
    return bonus
