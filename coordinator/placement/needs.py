"""What a run needs, derived once from its `requested_resources` and context."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from operator import attrgetter
from typing import Final

from astraeus.shared import (
    GpuPolicy,
    GpuRequests,
    Interconnect,
    KeepWithin,
    LinkLayer,
    RequestedResources,
    SelectionMode,
    Spread,
)

from .model import RunRequest

STATIC_READS: Final = (
    "run.workspace",
    "run.pools",
    "run.time_limit_seconds",
    "has_image",
    "names",
    "match_labels",
    "ask.capabilities",
    "interconnect",
    "min_gbps",
    "asks_rdma",
    "link",
    "keep_within",
    "spread",
    "drive_names",
    "drive_bytes",
    "gpu_requests.models",
    "gpu_requests.vendor",
    "gpu_requests.min_memory_gb",
)
"""What of the run the `Reads.MACHINE` filters and GPU matching may read, as attribute paths of
`Needs`: the static key is made of exactly these, so their verdicts, kept per static key, hold
for every run with the same key (a filter reading anything else fails
`tests/placement/test_filter_reads.py`)."""
_static_reads = attrgetter(*STATIC_READS)


def _hashable(value: object) -> object:
    if isinstance(value, dict):
        return tuple(sorted(value.items()))
    if isinstance(value, list):
        return tuple(value)
    return value


@dataclass(frozen=True)
class WorkerAsk:
    """One worker's share: its GPUs, and the cores and memory that go with them."""

    gpus: int
    cpu_cores: float
    memory_bytes: int


@dataclass(frozen=True)
class Needs:
    """The run's ask, read once: every filter, score and rung reads this, never the raw ask."""

    run: RunRequest

    @property
    def ask(self) -> RequestedResources:
        return self.run.ask

    @cached_property
    def gpus(self) -> int:
        return self.ask.gpu_count

    @cached_property
    def gpu_requests(self) -> GpuRequests:
        return self.ask.gpu_requests or GpuRequests()

    @cached_property
    def interconnect(self) -> Interconnect:
        return self.ask.network.interconnect if self.ask.network else Interconnect.AUTO

    @cached_property
    def min_gbps(self) -> float | None:
        return self.ask.network.min_gbps if self.ask.network else None

    @cached_property
    def asks_rdma(self) -> bool:
        """The network asks for RDMA: `rdma` or `infiniband`, or an RDMA port speed."""
        return self.interconnect in (Interconnect.RDMA, Interconnect.INFINIBAND) or bool(
            self.min_gbps
        )

    @cached_property
    def link(self) -> LinkLayer | None:
        """The link layer the run insists on, if any."""
        return LinkLayer.INFINIBAND if self.interconnect is Interconnect.INFINIBAND else None

    @cached_property
    def keep_within(self) -> KeepWithin | None:
        return self.ask.topology.keep_within if self.ask.topology else None

    @cached_property
    def spread(self) -> Spread | None:
        return self.ask.topology.spread if self.ask.topology else None

    @cached_property
    def mode(self) -> SelectionMode:
        selection = self.ask.node_selection
        return selection.mode if selection else SelectionMode.EXACT

    @cached_property
    def array_element(self) -> bool:
        """One element of an array run: an independent task with the run's per-worker ask."""
        return self.run.array_index is not None

    @cached_property
    def stacks(self) -> bool:
        """Workers of this run may share a machine (`mode: Any`), unless a rule puts one worker
        per machine (`topology.spread`, `policy: PerNode`). An array element is one worker."""
        return (
            self.mode is SelectionMode.ANY
            and self.spread is None
            and self.gpu_requests.policy is not GpuPolicy.PER_NODE
            and not self.array_element
        )

    @cached_property
    def must_not_share(self) -> bool:
        """The `spread` filter applies: no two workers of this run on one machine. Each array
        element is its own task, so the spread rule applies per element (one worker: never)."""
        return not self.stacks and not self.array_element

    @cached_property
    def names(self) -> frozenset[str]:
        selection = self.ask.node_selection
        return frozenset(selection.names) if selection else frozenset()

    @cached_property
    def match_labels(self) -> dict[str, str]:
        selection = self.ask.node_selection
        return dict(selection.match_labels) if selection else {}

    @cached_property
    def drive_bytes(self) -> int:
        return sum(drive.size_bytes for drive in self.ask.drives)

    @cached_property
    def has_image(self) -> bool:
        """The run names a container image (the `capabilities` filter: it needs `container`)."""
        return self.run.image is not None

    @cached_property
    def drive_names(self) -> tuple[str, ...]:
        return tuple(drive.name for drive in self.ask.drives)

    @cached_property
    def static_key(self) -> tuple[object, ...]:
        """Everything the filters that read only what a machine is (`Reads.MACHINE`) and GPU
        matching may read of the run (`STATIC_READS`, each made hashable): runs with equal keys
        get the same verdicts from them on every machine."""
        return tuple(_hashable(value) for value in _static_reads(self))

    def worker(self, gpus: int) -> WorkerAsk:
        """A worker with `gpus` GPUs: `per_gpu` scales with them, a fixed ask does not."""
        per_gpu = self.ask.per_gpu
        cores = self.ask.worker_cpu_cores
        memory = self.ask.worker_memory_bytes
        if per_gpu is not None:
            cores += float(per_gpu.cpu_cores) * gpus
            memory += per_gpu.memory_bytes * gpus
        return WorkerAsk(gpus=gpus, cpu_cores=cores, memory_bytes=memory)

    def fits(self, gpus: int, free_cores: float, free_memory: int) -> bool:
        """A worker with `gpus` GPUs fits in these free cores and memory (the `room` filter's
        test)."""
        worker = self.worker(gpus)
        return worker.cpu_cores <= free_cores and worker.memory_bytes <= free_memory

    @cached_property
    def _most(self) -> dict[tuple[int, float, int], int]:
        """`most_gpus` answers already worked out: machines alike in what is free (most of
        them, in a large cluster) ask the same question."""
        return {}

    def most_gpus(self, limit: int, free_cores: float, free_memory: int) -> int:
        """The most GPUs, at most `limit`, whose worker fits in what is free; -1 if none."""
        key = (limit, free_cores, free_memory)
        found = self._most.get(key)
        if found is None:
            found = self._most[key] = self._most_gpus(limit, free_cores, free_memory)
        return found

    def _most_gpus(self, limit: int, free_cores: float, free_memory: int) -> int:
        per_gpu = self.ask.per_gpu
        most = limit
        # A first guess by division, then settled by `fits` itself, so both always agree.
        if per_gpu is not None and per_gpu.cpu_cores:
            spare = free_cores - self.ask.worker_cpu_cores
            most = min(most, math.floor(spare / float(per_gpu.cpu_cores)))
        if per_gpu is not None and per_gpu.memory_bytes:
            spare_memory = free_memory - self.ask.worker_memory_bytes
            most = min(most, spare_memory // per_gpu.memory_bytes)
        most = max(most, -1)
        while most < limit and self.fits(most + 1, free_cores, free_memory):
            most += 1
        while most >= 0 and not self.fits(most, free_cores, free_memory):
            most -= 1
        return most
