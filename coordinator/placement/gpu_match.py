"""Which of a machine's GPUs a run may use, and which it takes.

Faulted GPUs are never used. At-risk GPUs are taken only when no healthy one is free (and cost
the machine in the score); with `healthy_only` never.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from functools import cache
from typing import NamedTuple

from astraeus.shared import GpuHealthState, GpuInfo, GpuRequests

GIB = 1024**3
MEMORY_SLACK_GB = Decimal("0.5")
"""An 80 GB H100 reports 79.6 GB: memory asks get this much slack. GB here are GiB, the unit
cards report in (an H100 80GB has 81559 MiB)."""


@cache
def least_memory_bytes(min_memory_gb: float) -> int:
    """The least memory a GPU may report for `min_memory_gb`, in whole bytes, compared exactly:
    the ask as written (80.1 is 80.1, not the float nearest it) less the slack, rounded up."""
    exact = (Decimal(repr(min_memory_gb)) - MEMORY_SLACK_GB) * GIB
    return max(int(exact.to_integral_value(rounding=ROUND_CEILING)), 0)


def matches(ask: GpuRequests, gpu: GpuInfo) -> bool:
    """The GPU is of a model, vendor and memory size the run asks for (health aside)."""
    if ask.vendor is not None and gpu.vendor is not ask.vendor:
        return False
    if ask.min_memory_gb is not None and gpu.memory_bytes < least_memory_bytes(ask.min_memory_gb):
        return False
    if ask.models:
        model = gpu.model.casefold()
        return any(wanted.casefold() in model for wanted in ask.models)
    return True


@dataclass(frozen=True)
class Matched:
    """A machine's GPUs of the asked kind that are not faulted, in index order, by health."""

    healthy: tuple[str, ...]
    at_risk: tuple[str, ...]
    healthy_set: frozenset[str]
    at_risk_set: frozenset[str]
    every: bool = False
    """Every GPU of the machine is here and healthy: its free GPUs are all usable."""


def matched(ask: GpuRequests, gpus: Sequence[GpuInfo]) -> Matched:
    healthy: list[str] = []
    at_risk: list[str] = []
    for gpu in gpus:
        state = gpu.health.state
        if state is GpuHealthState.FAULTED or not matches(ask, gpu):
            continue
        (healthy if state is GpuHealthState.HEALTHY else at_risk).append(gpu.uuid)
    every = len(healthy) == len(gpus)
    return Matched(tuple(healthy), tuple(at_risk), frozenset(healthy), frozenset(at_risk), every)


class Supply(NamedTuple):
    """How many of a machine's GPUs of the asked kind there are, by health, and how many free.
    A tuple: built for every machine an explanation checks, and a cheap key as it is."""

    healthy_free: int
    at_risk_free: int
    usable: int
    """Matching GPUs that are not faulted, free or not: what the machine could ever give."""
    healthy: int
    """Matching healthy GPUs, free or not."""

    def free(self, healthy_only: bool) -> int:
        return self.healthy_free + (0 if healthy_only else self.at_risk_free)


def supply(found: Matched, free_ids: set[str]) -> Supply:
    """`free_ids` are GPUs of the same machine, so when every one matches, all are usable."""
    return Supply(
        len(free_ids) if found.every else len(found.healthy_set & free_ids),
        len(found.at_risk_set & free_ids) if found.at_risk else 0,
        len(found.healthy) + len(found.at_risk),
        len(found.healthy),
    )


def take(found: Matched, free_ids: set[str], count: int) -> tuple[tuple[str, ...], int]:
    """`count` free GPUs, healthy first, in index order so the same GPUs are always taken first;
    and how many of them are at risk."""
    healthy = tuple(uuid for uuid in found.healthy if uuid in free_ids)[:count]
    at_risk = tuple(uuid for uuid in found.at_risk if uuid in free_ids)[: count - len(healthy)]
    return healthy + at_risk, len(at_risk)
