"""CPU pressure on the machine: −20."""

from __future__ import annotations

from typing import Final

from .term import ScoreInput

NAME: Final = "cpu_pressure"
POINTS: Final = -20


def points(s: ScoreInput) -> int:
    return POINTS if s.facts.report is not None and s.facts.report.cpu_pressure else 0
