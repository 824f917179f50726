"""A pass's decisions as the store writes them (`store/commit.py`'s rows), made where the pass
was decided: in the worker process, so what crosses the pipe back to the service is named
tuples of strings and numbers (JSON already written, one text per distinct explanation), not
thousands of models the service would unpickle while agents' reports wait."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from astraeus.coordinator.store.commit import (
    ExplanationRow,
    PlacementRow,
    WaitingRow,
    explanation_row,
    placement_row,
)
from astraeus.coordinator.store.preemption import PreemptionRow

from .items import QueueItem, Reshaped
from .queue_walk import PassOutcome


@dataclass
class PassRows:
    """A pass's decisions, ready to write."""

    placed: list[PlacementRow] = field(default_factory=list)
    waiting: list[WaitingRow] = field(default_factory=list)
    submitted_at: list[datetime | None] = field(default_factory=list)
    """When each placed run was submitted (the placement latency metric)."""
    reshaped: list[Reshaped] = field(default_factory=list)
    preempting: list[PreemptionRow] = field(default_factory=list)
    """Runs to stop, for each run that preempts them."""


def as_rows(outcome: PassOutcome[QueueItem]) -> PassRows:
    """`outcome` as rows; runs sharing an explanation share one `ExplanationRow` (serialised
    once, and pickled once)."""
    explanations: dict[int, ExplanationRow] = {}
    decided = PassRows(reshaped=list(outcome.reshaped))
    for preempting in outcome.preempting:
        item, reclaimed = preempting.item, tuple(sorted(preempting.reclaimed))
        stop = PreemptionRow(
            preempting.victims, item.priority, preempting.gpus, reclaimed, item.seq
        )
        decided.preempting.append(stop)
    for placed in outcome.placed:
        item = placed.item
        decided.placed.append(placement_row(item.seq, item.run, item.index, placed.placement))
        decided.submitted_at.append(item.submitted_at)
    for wait in outcome.waiting:
        item, row = wait.item, None
        if wait.explanation is not None:
            row = explanations.get(id(wait.explanation))
            if row is None:
                row = explanation_row(len(explanations), wait.explanation, wait.rejections)
                explanations[id(wait.explanation)] = row
        waiting = WaitingRow(item.seq, item.run, item.index, wait.reason, wait.kind.value, row)
        decided.waiting.append(waiting)
    return decided
