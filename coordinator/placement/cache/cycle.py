"""The cycle state: what one run's evaluation works out once and reads again (the third level
of the cache, see `cache/__init__.py`). It lives as long as its `RunEvaluation`: one `place`
call, or one ask's evaluation against the idle cluster kept with the frame."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .. import gpu_match
    from ..rejection import Rejection
    from ..shape import ShapeOption

VerdictKey = tuple[bool, Hashable]
"""(a worker of the run already here, the machine's free kind): everything the filters that
read where the run is or what is free (`Reads.RUN`, `Reads.FREE`) may read of a machine, so
machines with equal keys get one verdict from them."""


@dataclass(slots=True)
class CycleState:
    """One run's memos over one session's machines, each keyed by what its answer reads: a
    machine's index where it reads the machine itself, its free kind where it reads only what
    the kind describes and what is free."""

    rejections: dict[int, Rejection | None] = field(default_factory=dict)
    """The first filter keeping each machine out of the run's smallest worker."""
    passes: dict[int, bool] = field(default_factory=dict)
    """Whether no filter keeps each machine out."""
    verdicts: dict[VerdictKey, Rejection | None] = field(default_factory=dict)
    """The `Reads.RUN` and `Reads.FREE` filters' first rejection."""
    others: dict[Hashable, Rejection | None] = field(default_factory=dict)
    """The dynamic filters `passes` runs besides `spread`, `room` and `gpus`, by free kind."""
    supply: dict[Hashable, gpu_match.Supply] = field(default_factory=dict)
    """The machine's GPUs of the kind asked, by free kind."""
    caps: dict[Hashable, int] = field(default_factory=dict)
    """The most GPUs one worker can get, by free kind."""
    shares: dict[Hashable, int] = field(default_factory=dict)
    """The machine's part of a run no shape of which fits, by free kind."""
    scores: dict[tuple[int, int, bool], int] = field(default_factory=dict)
    """A worker's score, by (machine, its GPUs, RDMA work)."""
    slots: dict[tuple[int, ShapeOption], int] = field(default_factory=dict)
    """How many workers of a shape each machine takes."""
    holders: dict[ShapeOption, int] = field(default_factory=dict)
    """Workers of each shape the idle cluster could hold, for shapes it cannot hold whole."""
