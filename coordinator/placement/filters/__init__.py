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
from .check import Check, Reads

Filter = Callable[[Check], Rejection | None]
Filters = tuple[tuple[str, Filter], ...]

GUIDE_ORDER = (
    up,
    accepting,
    capabilities,
    selection,
    rdma,
    spread,
    room,
    gpus,
    topology,
    drives,
    reservations,
)
"""Each module declares its `NAME`, its `check` and what it `READS`."""

FILTERS: Filters = tuple((module.NAME, module.check) for module in GUIDE_ORDER)
READS_OF: dict[str, Reads] = {module.NAME: module.READS for module in GUIDE_ORDER}
"""What each filter declares it reads: where its verdicts are kept (`placement/cache/`)."""


def _reading(*kinds: Reads) -> Filters:
    return tuple((m.NAME, m.check) for m in GUIDE_ORDER if m.READS in kinds)


def _before_dynamic() -> Filters:
    """The static filters before the first that reads the run or what is free, in order."""
    first = next(i for i, m in enumerate(GUIDE_ORDER) if m.READS is not Reads.MACHINE)
    return FILTERS[:first]


EARLY = _before_dynamic()
"""Filters that read only what a machine is (and the run's ask), before the first that reads
more: a pass computes them once per machine for every run with the same ask, and so does every
later session of the same live state."""
DYNAMIC = _reading(Reads.RUN, Reads.FREE)
"""Filters that read where the run's workers are or what is free now."""
FREE = _reading(Reads.FREE)
"""`DYNAMIC` on an idle cluster, where no worker of the run is anywhere yet."""
LATE = tuple(f for f in _reading(Reads.MACHINE) if f not in EARLY)
"""The static filters after the dynamic ones."""
DECIDED_APART = frozenset({spread.NAME, room.NAME, gpus.NAME})
"""Dynamic filters a run's evaluation decides, for placement, without running them: `spread` by
whether a worker of the run is on the machine (then every filter runs), `room` and `gpus` by the
most GPUs a worker can get there (`RunEvaluation.cap`)."""
OTHER_DYNAMIC = tuple(f for f in DYNAMIC if f[0] not in DECIDED_APART)
"""The dynamic filters placement must run besides (none of the guide's; a new one lands here)."""
OTHER_FREE = tuple(f for f in FREE if f[0] not in DECIDED_APART)
"""`OTHER_DYNAMIC` on an idle cluster."""

if EARLY + DYNAMIC + LATE != FILTERS:
    raise ImportError("filters reading free capacity must come together, between static ones")


def first_rejection(c: Check, filters: Filters = FILTERS) -> Rejection | None:
    """The first filter, in the guide's order, that keeps the machine out."""
    for _name, decide in filters:
        rejection = decide(c)
        if rejection is not None:
            return rejection
    return None


__all__ = [
    "DYNAMIC",
    "EARLY",
    "FILTERS",
    "FREE",
    "LATE",
    "OTHER_DYNAMIC",
    "OTHER_FREE",
    "READS_OF",
    "Check",
    "Filter",
    "Filters",
    "Reads",
    "first_rejection",
]
