"""Cores left free after placing: up to +25, in proportion to the machine's cores."""

from __future__ import annotations

from typing import Final

from .term import ScoreInput

NAME: Final = "cores_free"
MOST: Final = 25


def points(s: ScoreInput) -> int:
    report = s.facts.report
    return of(report.cpu_cores if report else 0, s.free.cpu_cores, s.worker.cpu_cores)


def of(total: float, free: float, need: float) -> int:
    if total <= 0:
        return 0
    return int(MOST * max(free - need, 0) // total)
