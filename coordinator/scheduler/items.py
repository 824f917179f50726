"""The scheduler's own types: a placement to make (`QueueItem`, built from the store's plain
`QueueRow`; a dry run's `Candidate`, which is not stored) and what a pass decided for it
(`Placed`, `Waiting`, `Reshaped`).

The store never imports them: it reads rows, and writes decisions as the rows `pass_rows.py`
makes of them (`store/commit.py`'s `PlacementRow` and `WaitingRow`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from astraeus.coordinator.placement import Placement
from astraeus.coordinator.placement.verdicts import Verdicts
from astraeus.coordinator.store.queue import QueueRow
from astraeus.coordinator.store.unstarted import Unstarted
from astraeus.shared import PendingExplanation, RequestedResources, RunSpec
from astraeus.shared.explanation import RejectionGroup
from astraeus.shared.reasons import ReasonKind


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """A run to place, as the queue rules and the engine read it: a queued one (`QueueItem`),
    or the run a dry run asks about, which is not stored (no `seq`, no live tasks)."""

    workspace: str
    run: str
    index: int
    """The array element, or 0 for a run placed whole."""
    is_array: bool
    priority: int
    ask: RequestedResources
    image: str | None
    time_limit_seconds: int | None
    first_evaluated_at: datetime | None
    submitted_at: datetime | None = None

    @property
    def key(self) -> tuple[str, str]:
        """The run's identity in the cluster (the placement engine's `RunKey`)."""
        return (self.workspace, self.run)

    @property
    def label(self) -> str:
        """How other runs' reasons name it."""
        return f"{self.run}-{self.index}" if self.is_array else self.run


@dataclass(frozen=True, kw_only=True)
class QueueItem(Candidate):
    """One placement to make from the queue: a whole stored run, or one element of an array
    run; `seq` is the run's row."""

    seq: int


def candidate(spec: RunSpec, workspace: str) -> Candidate:
    """The run `spec` would be in `workspace` if submitted now (a dry run's question): element 0
    of an array, never evaluated before."""
    return Candidate(
        workspace=workspace,
        run=spec.name,
        index=0,
        is_array=spec.requested_resources.array is not None,
        priority=spec.priority,
        ask=spec.requested_resources,
        image=spec.image,
        time_limit_seconds=spec.time_limit_seconds,
        first_evaluated_at=None,
    )


Parsed = tuple[RequestedResources, dict[str, object]]
"""A run's parsed ask and its whole spec, kept between passes (a stored spec never changes)."""


def queue_items(rows: list[QueueRow], cache: dict[int, Parsed] | None = None) -> list[QueueItem]:
    """The store's pending rows as queue items, in the same order. `cache` keeps parsed asks
    between passes; runs no longer queued are dropped from it."""
    parsed: dict[int, Parsed] = {} if cache is None else cache
    items = [queue_item(row, parsed) for row in rows]
    for gone in set(parsed) - {row.seq for row in rows}:
        del parsed[gone]
    return items


def queue_item(row: QueueRow, cache: dict[int, Parsed] | None = None) -> QueueItem:
    """One stored pending task as a queue item (its spec parsed once per run with `cache`)."""
    found = cache.get(row.seq) if cache is not None else None
    if found is None:
        found = parsed_spec(row.spec)
        if cache is not None:
            cache[row.seq] = found
    ask, spec = found
    return QueueItem(
        seq=row.seq,
        workspace=row.workspace,
        run=row.run,
        index=row.index,
        is_array=ask.array is not None,
        priority=row.priority,
        ask=ask,
        image=spec.get("image"),  # type: ignore[arg-type]
        time_limit_seconds=spec.get("time_limit_seconds"),  # type: ignore[arg-type]
        first_evaluated_at=row.first_evaluated_at,
        submitted_at=row.submitted_at,
    )


def parsed_spec(text: str) -> Parsed:
    """A stored spec (as `read_queue` gives it: the parts a placement reads), parsed; runs
    whose specs read alike share one parse (a queue of 10,000 copies of one ask is decoded and
    validated once, not 10,000 times). Neither the ask nor the spec is ever changed in place."""
    found = _PARSED.get(text)
    if found is None:
        if len(_PARSED) >= KEPT_SPECS:
            del _PARSED[next(iter(_PARSED))]
        spec = json.loads(text)
        ask = RequestedResources.model_validate(spec["requested_resources"])
        found = _PARSED[text] = (ask, spec)
    return found


_PARSED: dict[str, Parsed] = {}
KEPT_SPECS = 1024
"""Distinct specs kept parsed; the oldest is dropped first."""


Item = TypeVar("Item", bound=Candidate)
"""What a pass decides about: `QueueItem`s (a pass, whose decisions are stored) or also a
`Candidate` (a dry run's, never stored: the store's protocols need a `seq`)."""


@dataclass(frozen=True)
class Placed(Generic[Item]):
    """A pass places `item` as `placement`."""

    item: Item
    placement: Placement


@dataclass(frozen=True)
class Waiting(Generic[Item]):
    """A pass leaves `item` pending, for `reason`."""

    item: Item
    reason: str
    explained: Verdicts | None
    """Why each machine is out (the engine's verdicts); made into `explanation` and
    `rejections` when they are stored or asked for whole."""
    kind: ReasonKind
    """What `reason` is, stored next to it so no reader classifies the text."""

    @property
    def explanation(self) -> PendingExplanation | None:
        """The guide's explanation, every machine with its reason (made once, then kept)."""
        return self.explained.full() if self.explained is not None else None

    @property
    def rejections(self) -> list[RejectionGroup]:
        """What keeps each machine of `explanation` out, as data; stored with it."""
        return self.explained.groups() if self.explained is not None else []


@dataclass(frozen=True)
class Preempting(Generic[Item]):
    """A pass's decision that `item` starts once the runs `victims` (their rows) stop: they are
    told to stop now, `gpus` GPUs between them."""

    item: Item
    victims: tuple[int, ...]
    gpus: int
    reclaimed: frozenset[int] = frozenset()
    """The victims stopped because `item` reclaims its workspace's guarantee."""


@dataclass(frozen=True)
class Reshaped:
    """A pass's decision to move an unstarted run to `placement`."""

    old: Unstarted
    placement: Placement
