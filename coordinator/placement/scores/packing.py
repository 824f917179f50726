"""GPUs packed: the share of the machine's GPUs in use after placing, up to +50."""

from __future__ import annotations

from typing import Final

from .term import ScoreInput

NAME: Final = "gpus_packed"
MOST: Final = 50


def points(s: ScoreInput) -> int:
    return of(len(s.facts.gpus), len(s.free.gpu_ids), s.worker.gpus)


def of(total: int, free: int, gpus: int) -> int:
    """The points for taking `gpus` of a machine's `total` GPUs when `free` are free."""
    if gpus == 0 or total == 0:
        return 0
    return MOST * (total - free + gpus) // total
