"""Machines ordered for a single worker's search, in classes of machines alike for it.

A class is every machine with the same (GPUs in all, GPUs free) bucket and the same cores and
memory, in all and free: the search's exact bound (packing, CPU-only, cores-free and memory-free
terms) is the same for all of them, so it is computed once per class, and since ties go to the
lowest name, the class's members are tried in name order only until one of them can no longer beat
the best found. Each bucket lists its classes by how much of their cores and memory is free.
`update` keeps it current; `fork` gives a pass its own copy to change, sharing every bucket and
class until the copy changes it (copy-on-write). It also keeps each machine's free kind
(`kinds.FreeKind`), by which a run's evaluation checks the `Reads.FREE` filters once per free
kind."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Sequence
from typing import NamedTuple

from astraeus.shared import GpuHealthState

from ..facts import Free, MachineFacts
from ..scores import cores_free, memory_free
from .kinds import FreeKind, Kind, free_kind


class Bucket(NamedTuple):
    """Machines with as many GPUs in all, and as many free."""

    gpus: int
    free_gpus: int


class Capacity(NamedTuple):
    """What a class's machines have in all and free besides their GPUs' count. No worker is
    ever given a faulted GPU, so a class whose other free GPUs are too few is skipped whole;
    and a worker takes healthy GPUs first, so the at-risk ones it must take bound its score
    too."""

    reported: bool
    cpu_cores: float
    free_cpu_cores: float
    memory_bytes: int
    free_memory_bytes: int
    faulted_free: int
    """Free GPUs that are faulted."""
    at_risk_free: int
    """Free GPUs at risk."""


ClassKey = tuple[Bucket, Capacity]
"""One class: machines alike for the single-worker search's exact bound."""
Entry = tuple[float, Capacity]
"""A class in its bucket's list, which ascends: the negated headroom (the most first), then its
capacity.

These two, made for every machine the index reads and only hashed, compared or unpacked, are
plain tuples: as `NamedTuple`s they made the live state's build measurably slower."""


def headroom(facts: MachineFacts, free: Free) -> float:
    """An upper bound of the cores-free and memory-free terms, for any worker."""
    report = facts.report
    if report is None or report.cpu_cores <= 0 or report.memory_bytes <= 0:
        return 0.0
    cores = cores_free.MOST * free.cpu_cores / report.cpu_cores
    return cores + memory_free.MOST * free.memory_bytes / report.memory_bytes


def _class_of(facts: MachineFacts, free: Free) -> tuple[ClassKey, Entry]:
    report = facts.report
    faulted = at_risk = 0
    for gpu in facts.gpus:
        state = gpu.health.state
        if state is not GpuHealthState.HEALTHY and gpu.uuid in free.gpu_ids:
            faulted += state is GpuHealthState.FAULTED
            at_risk += state is GpuHealthState.AT_RISK
    if report is None:
        capacity = Capacity(False, 0.0, free.cpu_cores, 0, free.memory_bytes, faulted, at_risk)
    else:
        cores, memory = report.cpu_cores, report.memory_bytes
        capacity = Capacity(
            True, cores, free.cpu_cores, memory, free.memory_bytes, faulted, at_risk
        )
    bucket = Bucket(len(facts.gpus), len(free.gpu_ids))
    # Negated, so each bucket's list ascends from the class with the most room.
    return (bucket, capacity), (-headroom(facts, free), capacity)


class FreeIndex:
    def __init__(
        self, facts: Sequence[MachineFacts], free: Sequence[Free], kinds: Sequence[Kind]
    ) -> None:
        self._facts, self._free, self._kinds = facts, free, kinds
        self.buckets: dict[Bucket, list[Entry]] = {}
        """Each bucket's classes, the most headroom first."""
        self.classes: dict[ClassKey, list[int]] = {}
        """Each class's machines, in name order."""
        self.free_gpus: list[int] = [len(one.gpu_ids) for one in free]
        """Each machine's free GPUs, faulted or not, of any model."""
        self.free_kinds: list[FreeKind] = [
            free_kind(kind, one, now) for kind, one, now in zip(kinds, facts, free, strict=True)
        ]
        """Each machine's free kind: its kind and what is free on it."""
        self._where: list[tuple[ClassKey, Entry]] = []
        self._owned: set[object] = set()
        """Buckets and classes this index may change in place (not shared with another)."""
        for i in range(len(facts)):
            key, entry = _class_of(facts[i], free[i])
            self._where.append((key, entry))
            members = self.classes.setdefault(key, [])
            if not members:
                bucket, _capacity = key
                self.buckets.setdefault(bucket, []).append(entry)
            members.append(i)
        for entries in self.buckets.values():
            entries.sort()
        self._owned = {*self.buckets, *self.classes}

    def fork(
        self, facts: Sequence[MachineFacts], free: Sequence[Free], kinds: Sequence[Kind]
    ) -> FreeIndex:
        """A copy over `facts`, `free` and `kinds` (lists equal to this index's now, or to be
        brought to them by `update`) that changes without changing this one: buckets and
        classes are copied only when one of them first changes them, since neither may change
        in place from now on."""
        twin = FreeIndex.__new__(FreeIndex)
        twin._facts, twin._free, twin._kinds = facts, free, kinds
        self._owned = set()
        twin.buckets, twin.classes = dict(self.buckets), dict(self.classes)
        twin.free_gpus, twin._where = list(self.free_gpus), list(self._where)
        twin.free_kinds = list(self.free_kinds)
        twin._owned = set()
        return twin

    def update(self, i: int) -> None:
        """Machine `i`'s free capacity (or what it is) changed: move it to its new class."""
        old_key, old_entry = self._where[i]
        key, entry = _class_of(self._facts[i], self._free[i])
        self.free_gpus[i] = len(self._free[i].gpu_ids)
        self.free_kinds[i] = free_kind(self._kinds[i], self._facts[i], self._free[i])
        if key == old_key:
            return
        self._where[i] = (key, entry)
        members = self._own_class(old_key)
        del members[bisect_left(members, i)]
        if not members:
            del self.classes[old_key]
            old_bucket, _capacity = old_key
            entries = self._own_bucket(old_bucket)
            del entries[bisect_left(entries, old_entry)]
        members = self._own_class(key)
        if not members:
            bucket, _capacity = key
            insort(self._own_bucket(bucket), entry)
        insort(members, i)

    def _own_class(self, key: ClassKey) -> list[int]:
        if key not in self._owned:
            self.classes[key] = list(self.classes.get(key, ()))
            self._owned.add(key)
        return self.classes.setdefault(key, [])

    def _own_bucket(self, bucket: Bucket) -> list[Entry]:
        if bucket not in self._owned:
            self.buckets[bucket] = list(self.buckets.get(bucket, ()))
            self._owned.add(bucket)
        return self.buckets.setdefault(bucket, [])
