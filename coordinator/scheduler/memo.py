"""A pass with no change since the last decides nothing again (kube-scheduler's unschedulable
queue: a pod that did not fit is tried again only after a cluster event that could change it).

The last pass's inputs are remembered as a key: the live state's generation (any report that
changed, placement, task end, cordon, label or reservation moves it), the queue in order, and
the quota and array counts. When a pass has the same key, placed nothing and was not cut short,
the next pass with that key has nothing to do: every run it would look at waits for the same
reason, already written. A pass whose decisions could change with the clock alone (a run with
patience, a reservation that starts or ends at a time, an unstarted run that could be reshaped)
is never skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from astraeus.coordinator.placement.cache import LiveState
from astraeus.coordinator.store.unstarted import Unstarted

from .items import Candidate, QueueItem
from .queue_walk import PassContext, PassOutcome


@dataclass
class PassMemo:
    last: tuple[object, ...] | None = None

    def key(
        self,
        live: LiveState,
        items: Sequence[Candidate],
        unstarted: Sequence[Unstarted],
        context: PassContext,
    ) -> tuple[object, ...] | None:
        """What the pass's decisions depend on; None when the clock alone may change them."""
        if unstarted or live.frame.timed or any(_patient(item) for item in items):
            return None
        queue = tuple(
            (_seq(item), item.index, item.priority, item.first_evaluated_at is None)
            for item in items
        )
        return (
            id(live),
            live.generation,
            queue,
            tuple(sorted(context.workspaces.items())),
            tuple(sorted(context.use_by_workspace.items())),
            tuple(sorted(context.live_by_run.items())),
            context.max_pending_evaluations,
            context.preemption.key if context.preemption is not None else None,
        )

    def unchanged(self, key: tuple[object, ...] | None) -> bool:
        """The pass with this key would only repeat the last one, which changed nothing."""
        return key is not None and key == self.last

    def remember(
        self, key: tuple[object, ...] | None, decisions: PassOutcome[Any], cut: bool
    ) -> None:
        settled = not (
            cut
            or decisions.placed
            or decisions.reshaped
            or decisions.skipped
            or decisions.preempting
        )
        self.last = key if settled else None


def _seq(item: Candidate) -> int | None:
    """The run's row; None for a dry run's candidate, which is never stored."""
    return item.seq if isinstance(item, QueueItem) else None


def _patient(item: Candidate) -> bool:
    topology = item.ask.topology
    return bool(topology and topology.patience_seconds)
