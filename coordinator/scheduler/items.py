"""The scheduler's own types: a placement to make (`QueueItem`, built from the store's plain
`QueueRow`) and what a pass decided for it (`Placed`, `Waiting`, `Reshaped`).

The store never imports them: it reads rows, and writes decisions through the narrow protocols
of `store/commit.py` (`Placing`, `Explaining`), which these types satisfy.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime

from astraeus.coordinator.placement import Placement
from astraeus.coordinator.store.queue import QueueRow
from astraeus.coordinator.store.reshape import Unstarted
from astraeus.shared import PendingExplanation, RequestedResources
from astraeus.shared.explanation import RejectionGroup
from astraeus.shared.reasons import ReasonKind


@dataclass(frozen=True)
class QueueItem:
    """One placement to make: a whole run, or one element of an array run."""

    seq: int
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
        spec = json.loads(row.spec)
        found = (RequestedResources.model_validate(spec["requested_resources"]), spec)
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


@dataclass(frozen=True)
class Placed:
    """A pass places `item` as `placement`."""

    item: QueueItem
    placement: Placement


@dataclass(frozen=True)
class Waiting:
    """A pass leaves `item` pending, for `reason`."""

    item: QueueItem
    reason: str
    explanation: PendingExplanation | None
    kind: ReasonKind
    """What `reason` is, stored next to it so no reader classifies the text."""
    rejections: list[RejectionGroup] = field(default_factory=list)
    """What keeps each machine of `explanation` out, as data; stored with it."""


@dataclass(frozen=True)
class Reshaped:
    """A pass's decision to move an unstarted run to `placement`."""

    old: Unstarted
    placement: Placement
