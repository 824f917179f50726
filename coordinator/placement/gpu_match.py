"""Which of a machine's GPUs a run may use, and which it takes.

Faulted GPUs are never used. At-risk GPUs are taken only when no healthy one is free (and cost
the machine in the score); with `healthy_only` never.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from astraeus.shared import GpuHealthState, GpuInfo, GpuRequests

GIB = 1024**3
MEMORY_SLACK_GB = 0.5
"""An 80 GB H100 reports 79.6 GB: memory asks get this much slack."""


def matches(ask: GpuRequests, gpu: GpuInfo) -> bool:
    """The GPU is of a model, vendor and memory size the run asks for (health aside)."""
    if ask.vendor is not None and gpu.vendor is not ask.vendor:
        return False
    if (
        ask.min_memory_gb is not None
        and gpu.memory_bytes / GIB < ask.min_memory_gb - MEMORY_SLACK_GB
    ):
        return False
    if ask.models:
        model = gpu.model.casefold()
        return any(wanted.casefold() in model for wanted in ask.models)
    return True


@dataclass(frozen=True)
class Supply:
    """A machine's GPUs of the asked kind, by health and whether they are free."""

    healthy_free: tuple[str, ...]
    at_risk_free: tuple[str, ...]
    usable: int
    """Matching GPUs that are not faulted, free or not: what the machine could ever give."""
    healthy: int
    """Matching healthy GPUs, free or not."""

    def free(self, healthy_only: bool) -> int:
        return len(self.healthy_free) + (0 if healthy_only else len(self.at_risk_free))


def supply(ask: GpuRequests, gpus: Iterable[GpuInfo], free_ids: set[str]) -> Supply:
    """The machine's matching GPUs, in index order so the same GPUs are always taken first."""
    healthy_free: list[str] = []
    at_risk_free: list[str] = []
    usable = healthy = 0
    for gpu in gpus:
        state = gpu.health.state
        if state is GpuHealthState.FAULTED or not matches(ask, gpu):
            continue
        usable += 1
        healthy += state is GpuHealthState.HEALTHY
        if gpu.uuid in free_ids:
            bucket = healthy_free if state is GpuHealthState.HEALTHY else at_risk_free
            bucket.append(gpu.uuid)
    return Supply(tuple(healthy_free), tuple(at_risk_free), usable, healthy)


def take(found: Supply, count: int) -> tuple[tuple[str, ...], int]:
    """`count` GPUs, healthy first; and how many of them are at risk."""
    healthy = found.healthy_free[:count]
    at_risk = found.at_risk_free[: count - len(healthy)]
    return healthy + at_risk, len(at_risk)
