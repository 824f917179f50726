"""CPU-only worker on a GPU machine: −30, so CPU work leaves GPU machines' cores to GPU runs."""

from __future__ import annotations

from typing import Final

from .term import ScoreInput

NAME: Final = "cpu_only_on_gpu_machine"
POINTS: Final = -30


def points(s: ScoreInput) -> int:
    return of(len(s.facts.gpus), s.worker.gpus)


def of(machine_gpus: int, worker_gpus: int) -> int:
    return POINTS if worker_gpus == 0 and machine_gpus else 0
