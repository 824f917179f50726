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

FILTERS: tuple[tuple[str, Filter], ...] = (
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

ROOM_FILTERS = frozenset({room.NAME, gpus.NAME})
"""Filters whose verdict depends on what other runs hold right now."""


def first_rejection(c: Check) -> Rejection | None:
    """The first filter, in the guide's order, that keeps the machine out."""
    for _name, decide in FILTERS:
        rejection = decide(c)
        if rejection is not None:
            return rejection
    return None


__all__ = ["FILTERS", "ROOM_FILTERS", "Check", "Filter", "first_rejection"]
