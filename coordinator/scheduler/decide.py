"""One pass's decisions over a snapshot: what to place, and why each other run waits.

Pure: no database, no clock. The rule that keeps big gangs from starving is here: the first run
in queue order that waits only for room is the head; the machines it would use are held for it,
and runs behind it may start only elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from astraeus.coordinator.placement import (
    ClusterSnapshot,
    Pending,
    Placement,
    PlacementSession,
    RunRequest,
)
from astraeus.coordinator.store import Workspace
from astraeus.coordinator.store.commit import Placed, Waiting
from astraeus.coordinator.store.queue import QueueItem
from astraeus.shared import reasons


class Session(Protocol):
    """The placement engine over one snapshot: `placement.PlacementSession`."""

    def place(
        self, run: RunRequest, now: datetime, *, exclude: frozenset[str] = frozenset()
    ) -> Placement | Pending: ...

    def take(self, placement: Placement) -> None: ...


SessionFactory = Callable[[ClusterSnapshot], Session]


def engine() -> SessionFactory:
    """The real placement engine's session class."""
    return PlacementSession


@dataclass(frozen=True)
class PassContext:
    """What the queue rules need besides the snapshot."""

    workspaces: Mapping[str, Workspace]
    gpus_by_workspace: Mapping[str, int]
    live_by_run: Mapping[int, int]
    max_pending_evaluations: int = 500


@dataclass
class Decisions:
    placed: list[Placed] = field(default_factory=list)
    waiting: list[Waiting] = field(default_factory=list)
    skipped: int = 0
    """Waiting runs not explained this pass (past the evaluation budget)."""


def request_for(item: QueueItem, workspace: Workspace | None) -> RunRequest:
    return RunRequest(
        name=item.run,
        workspace=item.workspace,
        ask=item.ask,
        pools=tuple(workspace.pools) if workspace else (),
        image=item.image,
        time_limit_seconds=item.time_limit_seconds,
        first_evaluated_at=item.first_evaluated_at,
        array_index=item.index if item.is_array else None,
    )


def decide(
    items: Sequence[QueueItem],
    session: Session,
    now: datetime,
    context: PassContext,
) -> Decisions:
    """Walk the queue in order, placing what fits without taking what the head waits for."""
    held = dict(context.gpus_by_workspace)
    live = dict(context.live_by_run)
    out = Decisions()
    head: tuple[QueueItem, Pending] | None = None
    head_position = 0
    reserved: frozenset[str] = frozenset()
    evaluated = 0
    for position, item in enumerate(items):
        workspace = context.workspaces.get(item.workspace)
        held_reason = _queue_rule(item, workspace, held, live)
        if held_reason is not None:
            out.waiting.append(Waiting(item, held_reason, None))
            continue
        if evaluated >= context.max_pending_evaluations:
            out.skipped += 1
            continue
        evaluated += 1
        request = request_for(item, workspace)
        result = session.place(request, now, exclude=reserved)
        if isinstance(result, Placement):
            session.take(result)
            out.placed.append(Placed(item, result))
            held[item.workspace] = held.get(item.workspace, 0) + item.ask.gpu_count
            live[item.seq] = live.get(item.seq, 0) + len(result.workers)
            continue
        if head is not None and reserved and _fits_without_hold(session, request, now):
            out.waiting.append(
                Waiting(item, reasons.queued_behind(head[0].label), result.explanation)
            )
            continue
        if head is None and result.wanted_machines:
            head, head_position = (item, result), position
            reserved = frozenset(result.wanted_machines)
            continue
        out.waiting.append(Waiting(item, result.headline, result.explanation))
    if head is not None:
        out.waiting.insert(0, _head_waiting(head, behind=head_position < len(items) - 1))
    return out


def _queue_rule(
    item: QueueItem, workspace: Workspace | None, held: Mapping[str, int], live: Mapping[int, int]
) -> str | None:
    """The quota or array limit that holds this item back, if any."""
    need = item.ask.gpu_count
    quota = workspace.gpu_quota if workspace else None
    used = held.get(item.workspace, 0)
    if quota is not None and need and used + need > quota:
        return reasons.waits_for_quota(used, quota, need)
    array = item.ask.array
    concurrency = array.concurrency if array is not None else None
    if concurrency is not None and live.get(item.seq, 0) >= concurrency:
        return reasons.array_at_most(concurrency)
    return None


def _fits_without_hold(session: Session, request: RunRequest, now: datetime) -> bool:
    return isinstance(session.place(request, now), Placement)


def _head_waiting(head: tuple[QueueItem, Pending], *, behind: bool) -> Waiting:
    item, pending = head
    # "Next to run" only means something when other runs wait behind it; alone, the room reason
    # is the whole story (the guide's example: `No machine fits: 3 of 3 machines ready`).
    reason = reasons.next_to_run(pending.headline) if behind else pending.headline
    return Waiting(item, reason, pending.explanation)
