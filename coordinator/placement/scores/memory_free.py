"""Memory left free after placing: up to +25, in proportion to the machine's memory."""

from __future__ import annotations

from typing import Final

from .term import ScoreInput

NAME: Final = "memory_free"
MOST: Final = 25


def points(s: ScoreInput) -> int:
    report = s.facts.report
    return of(report.memory_bytes if report else 0, s.free.memory_bytes, s.worker.memory_bytes)


def of(total: int, free: int, need: int) -> int:
    if total <= 0:
        return 0
    return MOST * max(free - need, 0) // total
