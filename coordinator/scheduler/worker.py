"""A scheduler pass computed in a separate process.

The engine is pure Python: computed in a thread of the service, it holds the GIL, and every
report the event loop answers meanwhile waits for it at each database call. In its own process
the pass has a core of its own. The worker reads what it needs from the SQLite file (committed
data only, as WAL readers do) and sends back only the decisions; the service commits them.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path

from astraeus.coordinator.machine_records import MachineRecords
from astraeus.coordinator.placement import ClusterSnapshot, PlacementSession
from astraeus.coordinator.placement.live import LiveState
from astraeus.coordinator.store import Store
from astraeus.coordinator.store.queue import gpus_by_workspace, live_by_run, read_queue
from astraeus.coordinator.store.reshape import Unstarted, read_unstarted

from .decide import (
    EngineSession,
    PassContext,
    PassOutcome,
    SessionFactory,
    decide_within,
    make_explanations,
)
from .items import Item, Parsed, queue_items
from .memo import PassMemo
from .reshape import find_reshape
from .snapshot import Views, build_snapshot
from .written import Decided, written

WORKER_NICENESS = 10
"""Added to the pass worker's niceness."""

_OPEN: dict[str, tuple[Store, MachineRecords, dict[int, Parsed], Views, LiveState, PassMemo]] = {}
"""The worker's store, machine records, parsed asks, machine views, live placement state and last
pass's inputs, kept between passes (one worker serves one file)."""

UNFREEZE_EVERY = 100
"""Passes between handing the frozen objects back to the garbage collector."""

_passes = [0]


def start_worker(parent: int) -> None:
    """Run in the worker at start: a lower CPU priority, so on a busy machine the service's
    event loop (reports, API) gets a core first and passes take what is left; and watch the
    parent. Ctrl-C reaches the whole foreground process group: the service decides when the
    worker stops, so the worker ignores SIGINT (no KeyboardInterrupt traceback)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICENESS)
    watch_parent(parent)


def watch_parent(parent: int) -> None:
    """Exit when the service is gone (even killed with SIGKILL), instead of waiting forever
    for work that will not come."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1)
        os._exit(0)

    threading.Thread(target=watch, name="watch-parent", daemon=True).start()


def pass_context(store: Store, max_pending_evaluations: int) -> PassContext:
    return PassContext(
        workspaces={w.name: w for w in store.workspaces.all()},
        gpus_by_workspace=gpus_by_workspace(store.database),
        live_by_run=live_by_run(store.database),
        max_pending_evaluations=max_pending_evaluations,
    )


def compute_pass(
    db: str,
    now: datetime,
    down_after_seconds: float,
    heard_since: datetime,
    max_pending: int,
    max_seconds: float,
    access_labels: tuple[str, ...] = ("pool",),
    last_committed: bool = False,
) -> tuple[Decided, bool]:
    """Snapshot, queue and decisions from the file as committed now; see `decide_within`.
    Nothing when nothing changed since the last pass, whose decisions were all committed
    (`last_committed`, the service says) and changed nothing (`memo`). The decisions come back
    as the rows the store writes (`written`)."""
    if db not in _OPEN:
        store = Store.open(Path(db))
        _OPEN[db] = (
            store,
            MachineRecords(store, access_labels),
            {},
            Views(),
            LiveState(),
            PassMemo(),
        )
    store, records, asks, views, live, memo = _OPEN[db]
    records.reload()
    down_after = timedelta(seconds=down_after_seconds)
    snapshot = build_snapshot(store, records, now, down_after, heard_since, views)
    items = queue_items(read_queue(store.database), asks)
    context = pass_context(store, max_pending)
    unstarted = read_unstarted(store.database)
    live.update(snapshot)
    settle_garbage()
    key = memo.key(live, items, unstarted, context)
    if last_committed and memo.unchanged(key):
        return Decided(), False
    session = PlacementSession(live=live)
    factory = PlacementSession
    decisions, cut = plan(
        items, unstarted, snapshot, now, context, factory, max_seconds, session=session
    )
    make_explanations(decisions)
    memo.remember(key, decisions, cut)
    return written(decisions), cut


def settle_garbage() -> None:
    """Once the live state is current (built, not before): move it out of the collector's
    sight, or its full passes walk every machine's report and facts again and again
    (docs/placement.md). Every `UNFREEZE_EVERY` passes it is all handed back, so cycles among
    objects frozen while alive are still collected eventually."""
    _passes[0] += 1
    if _passes[0] % UNFREEZE_EVERY == 0:
        gc.unfreeze()
        gc.collect()
    gc.freeze()


def plan(
    items: Sequence[Item],
    unstarted: Sequence[Unstarted],
    snapshot: ClusterSnapshot,
    now: datetime,
    context: PassContext,
    factory: SessionFactory,
    seconds: float,
    stopping: Callable[[], bool] = lambda: False,
    session: EngineSession | None = None,
) -> tuple[PassOutcome[Item], bool]:
    """A pass's decisions: first at most one reshape of an unstarted run, then the queue.
    `session` (over a live state current with `snapshot`) decides the queue instead of one
    built from the snapshot.

    The queue's session takes the reshaped run's new workers; its old ones still count as held
    until the next pass (a pass never gives out what it has not committed as free)."""
    reshaped = find_reshape(unstarted, snapshot, now, context.workspaces, factory, seconds / 4)
    session = session or factory(snapshot)
    if reshaped is not None:
        session.take(reshaped.placement)
    decisions, cut = decide_within(items, session, now, context, seconds, stopping)
    if reshaped is not None:
        decisions.reshaped.append(reshaped)
    return decisions, cut
