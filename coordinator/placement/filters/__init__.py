"""The guide's 11 filters, in its order. A machine is out at the first one that rejects it."""

from __future__ import annotations

from collections.abc import Callable

from ..rejection import Rejection
from . import (
    accepting,
    capabilities,
    drives,
    gpus,
    rdma,
    reservations,
    room,
    selection,
    spread,
    topology,
    up,
)
from .check import Check

Filter = Callable[[Check], Rejection | None]
Filters = tuple[tuple[str, Filter], ...]

FILTERS: Filters = (
    (up.NAME, up.check),
    (accepting.NAME, accepting.check),
    (capabilities.NAME, capabilities.check),
    (selection.NAME, selection.check),
    (rdma.NAME, rdma.check),
    (spread.NAME, spread.check),
    (room.NAME, room.check),
    (gpus.NAME, gpus.check),
    (topology.NAME, topology.check),
    (drives.NAME, drives.check),
    (reservations.NAME, reservations.check),
)

EARLY = FILTERS[:5]
"""Filters 1–5 read only what a machine is and the run's ask, never what is free or the worker's
size: a pass computes them once per machine for every run with the same ask."""
DYNAMIC = FILTERS[5:8]
"""Spread, room and GPUs: they read the run's name, what is free now and the worker's size."""
LATE = FILTERS[8:]
"""Filters 9–11: like `EARLY`, independent of what is free."""


def first_rejection(c: Check, filters: Filters = FILTERS) -> Rejection | None:
    """The first filter, in the guide's order, that keeps the machine out."""
    for _name, decide in filters:
        rejection = decide(c)
        if rejection is not None:
            return rejection
    return None


__all__ = ["DYNAMIC", "EARLY", "FILTERS", "LATE", "Check", "Filter", "first_rejection"]
