"""Each GPU at risk taken: −60."""

from __future__ import annotations

from typing import Final

from .term import ScoreInput

NAME: Final = "gpus_at_risk"
PER_GPU: Final = -60


def points(s: ScoreInput) -> int:
    return PER_GPU * s.at_risk_taken
