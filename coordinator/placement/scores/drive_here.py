"""A drive the worker mounts is on this machine: +40 per drive."""

from __future__ import annotations

from typing import Final

from .term import ScoreInput

NAME: Final = "drives_here"
PER_DRIVE: Final = 40


def points(s: ScoreInput) -> int:
    here = s.facts.local_drives
    return PER_DRIVE * sum(drive.name in here for drive in s.needs.ask.drives)
