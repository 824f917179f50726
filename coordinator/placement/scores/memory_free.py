"""Memory left free after placing: up to +25, in proportion to the machine's memory."""

from __future__ import annotations

from typing import Final

from .term import ScoreInput

NAME: Final = "memory_free"
MOST: Final = 25


def points(s: ScoreInput) -> int:
    report = s.facts.report
    if report is None or report.memory_bytes <= 0:
        return 0
    left = max(s.free.memory_bytes - s.worker.memory_bytes, 0)
    return MOST * left // report.memory_bytes
