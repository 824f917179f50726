"""Cores left free after placing: up to +25, in proportion to the machine's cores."""

from __future__ import annotations

from typing import Final

from .term import ScoreInput

NAME: Final = "cores_free"
MOST: Final = 25


def points(s: ScoreInput) -> int:
    report = s.facts.report
    if report is None or report.cpu_cores <= 0:
        return 0
    left = max(s.free.cpu_cores - s.worker.cpu_cores, 0)
    return int(MOST * left // report.cpu_cores)
