"""Machines alike for the filters that read what is free (`Reads.FREE`: `room`, `gpus`): a machine's
kind (what it is, as they read it) and its free kind (its kind and what is free on it).

The `room` and `gpus` filters read a machine's cores and memory in all and free, and its GPUs'
model, vendor, memory and health, with which of them are free. Two machines of the same free kind
get the same verdicts from them for every run and worker, so a run's evaluation checks one machine
per distinct free kind (`RunEvaluation`), not every machine: a large cluster has thousands of
machines and a few dozen free kinds. The `spread` filter (a worker of the run already here,
`Reads.RUN`) is read per machine, as it is about the run, not the machine."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from astraeus.shared import GpuInfo

from ..facts import Free, MachineFacts

GpuDescription = tuple[str, str, int, str]
"""A GPU as the `Reads.FREE` filters read it: (vendor, model, memory, health). A plain tuple, not
a `NamedTuple`: one is made per GPU of every machine read, and it is only sorted, hashed and
compared, never read by position."""


GpuDescriptions = tuple[GpuDescription, ...]
"""Sorted: which GPU is which does not matter, only how many of each there are."""


class Description(NamedTuple):
    """What a machine is, as the `Reads.FREE` filters read it."""

    reported: bool
    cpu_cores: float
    memory_bytes: int
    gpus: GpuDescriptions


class Kind:
    """One distinct description. Compared by identity: alike machines share one object (see
    `Kinds`), so a free kind hashes and compares without walking the GPUs again; two objects
    for the same description are only a lost chance to share, never a wrong verdict."""

    __slots__ = ("description", "uniform")

    def __init__(self, description: Description, gpus: GpuDescriptions) -> None:
        self.description = description
        self.uniform = len(set(gpus)) <= 1
        """Every GPU alike: which of them are free does not matter, only how many."""


FreeKind = tuple[Kind, int | GpuDescriptions, float, int]
"""A machine's kind and what is free on it, (kind, free GPUs, free cores, free memory): machines of
one free kind get the same verdicts from the `Reads.FREE` filters. Free GPUs are their count
where every GPU of the kind is alike, else their descriptions, sorted. Made for every machine
the index reads and only hashed, so a plain tuple (see `free_index.ClassKey`)."""


def describe(facts: MachineFacts) -> Description:
    """Everything the `Reads.FREE` filters read of what the machine is."""
    report = facts.report
    if report is None:
        return Description(False, 0.0, 0, ())
    gpus = tuple(sorted(gpu_description(gpu) for gpu in facts.gpus))
    return Description(True, report.cpu_cores, report.memory_bytes, gpus)


def gpu_description(gpu: GpuInfo) -> GpuDescription:
    """The enums' values read as `_value_`, their plain attribute: `.value` is a Python-level
    descriptor, half of this function's time, and it runs for every GPU of every machine when
    the live state is built (400,000 times at 50,000 machines)."""
    vendor: str = gpu.vendor._value_
    health: str = gpu.health.state._value_
    return (vendor, gpu.model, gpu.memory_bytes, health)


class Kinds:
    """Interns descriptions: machines alike get one `Kind`. Kept with the live state; once it
    holds more descriptions than twice the machines (machines changed many times), it starts
    again from the kinds in use."""

    def __init__(self) -> None:
        self._known: dict[Description, Kind] = {}

    def of(self, facts: MachineFacts) -> Kind:
        description = describe(facts)
        kind = self._known.get(description)
        if kind is None:
            kind = self._known[description] = Kind(description, description.gpus)
        return kind

    def prune(self, in_use: Sequence[Kind]) -> None:
        if len(self._known) > 2 * len(in_use) + 64:
            self._known = {kind.description: kind for kind in in_use}


def free_kind(kind: Kind, facts: MachineFacts, free: Free) -> FreeKind:
    """The machine's free kind: its kind and which of its GPUs are free (how many, if all are
    alike), its free cores and memory."""
    ids = free.gpu_ids
    if kind.uniform:
        return (kind, len(ids), free.cpu_cores, free.memory_bytes)
    gpus = tuple(sorted(gpu_description(gpu) for gpu in facts.gpus if gpu.uuid in ids))
    return (kind, gpus, free.cpu_cores, free.memory_bytes)
