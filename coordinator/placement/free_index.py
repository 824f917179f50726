"""Machines ordered for a single worker's search: bucketed by (GPUs in all, GPUs free), and in
each bucket by how much of their cores and memory is free. `take` keeps it current."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Sequence

from .facts import Free, MachineFacts
from .scores import cores_free, memory_free

Bucket = tuple[int, int]


def headroom(facts: MachineFacts, free: Free) -> float:
    """An upper bound of the cores-free and memory-free terms, for any worker."""
    report = facts.report
    if report is None or report.cpu_cores <= 0 or report.memory_bytes <= 0:
        return 0.0
    cores = cores_free.MOST * free.cpu_cores / report.cpu_cores
    return cores + memory_free.MOST * free.memory_bytes / report.memory_bytes


class FreeIndex:
    def __init__(self, facts: Sequence[MachineFacts], free: Sequence[Free]) -> None:
        self._facts, self._free = facts, free
        self.buckets: dict[Bucket, list[tuple[float, int]]] = {}
        self.free_gpus: list[int] = [len(one.gpu_ids) for one in free]
        """Each machine's free GPUs, faulted or not, of any model."""
        self._entry: list[tuple[Bucket, tuple[float, int]]] = []
        for i in range(len(facts)):
            entry = self._entry_for(i)
            self._entry.append(entry)
            self.buckets.setdefault(entry[0], []).append(entry[1])
        for entries in self.buckets.values():
            entries.sort()

    def _entry_for(self, i: int) -> tuple[Bucket, tuple[float, int]]:
        facts, free = self._facts[i], self._free[i]
        # Negated, so each bucket's list ascends from the machine with the most room.
        return (len(facts.gpus), len(free.gpu_ids)), (-headroom(facts, free), i)

    def update(self, i: int) -> None:
        """Machine `i`'s free capacity changed: move it to its new place."""
        bucket, key = self._entry[i]
        entries = self.buckets[bucket]
        del entries[bisect_left(entries, key)]
        entry = self._entry_for(i)
        self._entry[i] = entry
        self.free_gpus[i] = len(self._free[i].gpu_ids)
        insort(self.buckets.setdefault(entry[0], []), entry[1])
