"""GPUs packed: the share of the machine's GPUs in use after placing, up to +50."""

from __future__ import annotations

from typing import Final

from .term import ScoreInput

NAME: Final = "gpus_packed"
MOST: Final = 50


def points(s: ScoreInput) -> int:
    total = len(s.facts.gpus)
    if s.worker.gpus == 0 or total == 0:
        return 0
    used_after = total - len(s.free.gpu_ids) + s.worker.gpus
    return MOST * used_after // total
