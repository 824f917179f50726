"""Filter 6: spread: no other worker of the run already here, when workers must not share."""

from __future__ import annotations

from typing import Final

from astraeus.shared import SelectionMode

from ..rejection import Rejection
from .check import Check

NAME: Final = "spread"
ALREADY_HERE: Final = "a worker of this run is already on this machine"


def check(c: Check) -> Rejection | None:
    if c.needs.mode is SelectionMode.ANY:
        return None
    if c.needs.run.key in c.facts.view.workers:
        return Rejection(NAME, ALREADY_HERE)
    return None
