"""The guide's score table, one term per module. Scores are integers; ties go by machine name."""

from __future__ import annotations

from collections.abc import Callable

from . import (
    at_risk,
    cores_free,
    cpu_only,
    cpu_pressure,
    drive_here,
    drive_near,
    memory_free,
    packing,
    rdma_at_risk,
    reserved_labels,
)
from .term import Home, ScoreInput

Term = Callable[[ScoreInput], int]

TERMS: tuple[tuple[str, Term], ...] = (
    (reserved_labels.NAME, reserved_labels.points),
    (packing.NAME, packing.points),
    (cpu_only.NAME, cpu_only.points),
    (cores_free.NAME, cores_free.points),
    (memory_free.NAME, memory_free.points),
    (at_risk.NAME, at_risk.points),
    (cpu_pressure.NAME, cpu_pressure.points),
    (rdma_at_risk.NAME, rdma_at_risk.points),
    (drive_here.NAME, drive_here.points),
    (drive_near.NAME, drive_near.points),
)


def breakdown(s: ScoreInput) -> list[tuple[str, int]]:
    """Every term's points, in the guide's order, zeros included."""
    return [(name, term(s)) for name, term in TERMS]


def total(s: ScoreInput) -> int:
    return sum(term(s) for _name, term in TERMS)


__all__ = ["TERMS", "Home", "ScoreInput", "Term", "breakdown", "total"]
