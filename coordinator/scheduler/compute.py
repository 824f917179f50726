"""One scheduler pass computed over a store: the one way a pass reads and decides.

A pass reads the cluster (`snapshot.py`), the queue, the unstarted runs and what the queue rules
need besides (`PassContext`); decides nothing when nothing changed since the last pass
(`memo.py`); and plans: at most one reshape of an unstarted run, then the queue walk
(`queue_walk.py`). The pass worker process (`pass_worker.py`) and the service itself (`loop.py`:
without a worker process, with a fake engine) call `compute_pass`, each with its own
`PassState`; a dry run (`dry_pass`) reads the same way and plans the queue ahead of one
candidate, remembering nothing. No clock read but `time.perf_counter` in the walk: `now` is an
input.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import overload

from astraeus.coordinator.machine_records import MachineRecords, collector_paused
from astraeus.coordinator.placement import ClusterSnapshot, PlacementSession
from astraeus.coordinator.placement.cache import LiveState
from astraeus.coordinator.store import Store
from astraeus.coordinator.store.db import Database
from astraeus.coordinator.store.preemption import (
    LiveRun,
    leaving_runs,
    read_live_runs,
    recent_preemptions,
)
from astraeus.coordinator.store.queue import Usage, live_by_run, read_queue, use_by_workspace
from astraeus.coordinator.store.unstarted import Unstarted, read_unstarted
from astraeus.coordinator.store.usage import fair_share_order

from .fair_share import Factors, ahead_of, fair_order, guaranteed_first
from .gc_policy import GcPolicy
from .items import Candidate, Item, Parsed, QueueItem, queue_items
from .memo import PassMemo
from .preemption import Preemption, within_guarantees
from .queue_walk import (
    EngineSession,
    PassContext,
    PassOutcome,
    SessionFactory,
    decide_within,
    make_explanations,
)
from .reshape import find_reshape
from .snapshot import Views, build_snapshot


def _never() -> bool:
    return False


@dataclass(frozen=True)
class PassInputs:
    """What one pass is asked with. Plain values: it crosses the pipe to the pass worker."""

    now: datetime
    down_after: timedelta
    heard_since: datetime
    """Silence counts from here at the earliest (`MachineRecord.state`)."""
    max_pending_evaluations: int
    max_seconds: float
    """How long the pass may decide (the reshape search gets a quarter of it)."""
    last_committed: bool = False
    """The last pass's decisions were all committed: a pass with no change since may decide
    nothing (`memo.py`)."""
    preemption: bool = False
    """`preemption = "priority"`: a waiting run may stop lower-priority runs."""
    preemption_max_per_minute: int = 0
    fair_share: bool = True
    """Order runs of equal priority by usage (`fair_share.py`); false: by submission alone."""
    backfill: bool = True
    """Runs with a time limit may use a head's machines (`queue_walk.py`); false: never."""


@dataclass
class PassState:
    """What one process keeps between passes over one store: the parsed asks, the machine
    views (`snapshot.Views`), the engine's live state (None with a fake engine, whose sessions
    `factory` builds from each snapshot), the last pass's inputs (`PassMemo`)."""

    store: Store
    records: MachineRecords
    """The machines as this process keeps them (`machine_records.py`)."""
    factory: SessionFactory = PlacementSession
    live: LiveState | None = field(default_factory=LiveState)
    trials: LiveState = field(default_factory=LiveState)
    """The live state of a pass's preemption trials (`preemption.py`), kept between passes;
    a dry run's trials use one of their own."""
    asks: dict[int, Parsed] = field(default_factory=dict)
    views: Views = field(default_factory=Views)
    memo: PassMemo = field(default_factory=PassMemo)
    gc: GcPolicy | None = None
    """Settled once the live state is current, before deciding: the pass worker's (its process
    has no loop after a pass). None in the service, whose loop settles after each pass."""
    stopping: Callable[[], bool] = _never
    """Asked between queue items: true stops the walk (`decide_within`)."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    """A pass and dry runs read into the same views and live state: one at a time (the plan
    itself runs outside it)."""


@dataclass(frozen=True)
class Reading:
    """What a pass reads of the store, but the unstarted runs (a dry run reshapes nothing)."""

    snapshot: ClusterSnapshot
    queue: list[QueueItem]
    """In fair-share order (`fair_share.py`)."""
    context: PassContext
    factors: Factors
    """Each workspace's fair-share factor, as the queue was ordered by."""


def compute_pass(state: PassState, inputs: PassInputs) -> tuple[PassOutcome[QueueItem], bool]:
    """A pass's decisions over the store as committed now, and whether it stopped before the
    end of the queue (the next pass goes on). Nothing when nothing changed since the last pass,
    whose decisions were all committed (`inputs.last_committed`) and changed nothing (`memo`).
    Waiting runs' explanations are made here (`make_explanations`)."""
    with state.lock:
        read = read_store(state, inputs)
        unstarted = read_unstarted(state.store.database)
        session = session_over(state, read.snapshot)
        if state.gc is not None:
            state.gc.settle()
        key = None
        if state.live is not None:
            key = state.memo.key(state.live, read.queue, unstarted, read.context)
    if inputs.last_committed and state.memo.unchanged(key):
        return PassOutcome(), False
    decisions, cut = plan(
        read.queue,
        unstarted,
        read.snapshot,
        inputs.now,
        read.context,
        state.factory,
        inputs.max_seconds,
        state.stopping,
        session,
    )
    make_explanations(decisions)
    state.memo.remember(key, decisions, cut)
    return decisions, cut


def dry_pass(state: PassState, inputs: PassInputs, item: Candidate) -> PassOutcome[Candidate]:
    """The decisions of a pass over `item` behind the queue ahead of it (runs of its priority
    or higher), queue rules included. Nothing is remembered and nothing is reshaped; the
    explanations are left to be made by whoever reads them."""
    with state.lock:
        read = read_store(state, inputs, dry=True)
        session = session_over(state, read.snapshot)
    ahead: list[Candidate] = list(ahead_of(item, read.queue, read.factors))
    decisions, _ = plan(
        [*ahead, item],
        (),
        read.snapshot,
        inputs.now,
        read.context,
        state.factory,
        inputs.max_seconds,
        state.stopping,
        session,
    )
    return decisions


def warm(state: PassState, inputs: PassInputs) -> None:
    """Read the store and build the live state as a dry run would, deciding nothing: at a start,
    so the first dry run after it costs what any other does (at 20,000 machines the first one
    built the snapshot, the live state and the cluster's ladder, ~2 s). Without the garbage
    collector (`collector_paused`): what it builds all lives on, and it is collected and frozen
    after (`settle_loaded`, `GcPolicy.settle`)."""
    with state.lock, collector_paused():
        read = read_store(state, inputs, dry=True)
        session_over(state, read.snapshot)
        if state.live is not None:
            state.live.frame.cluster(None)  # what a run without a network ask reads


def read_store(state: PassState, inputs: PassInputs, *, dry: bool = False) -> Reading:
    """The snapshot (views kept in `state`), the queue (asks parsed once, kept in `state`;
    in fair-share order) and the context. The caller holds `state.lock`. `dry`: for a dry
    run, which plans outside the lock (its preemption trials keep no state of the pass's)."""
    store = state.store
    snapshot = build_snapshot(
        store, state.records, inputs.now, inputs.down_after, inputs.heard_since, state.views
    )
    factors = fair_share_order(store.database) if inputs.fair_share else {}
    queue = fair_order(queue_items(read_queue(store.database), state.asks), factors)
    context = pass_context(
        store, inputs.max_pending_evaluations, state.views.usage, backfill=inputs.backfill
    )
    guarantees = {w.name: w.guaranteed_gpus for w in context.workspaces.values()}
    held = {name: use.gpus for name, use in context.use_by_workspace.items()}
    queue = guaranteed_first(queue, guarantees, held)
    if inputs.preemption or any(guarantees.values()):
        found = preemption(state, inputs, snapshot, guarantees, dry=dry)
        context = replace(context, preemption=found)
    return Reading(snapshot, queue, context, factors)


def preemption(
    state: PassState,
    inputs: PassInputs,
    snapshot: ClusterSnapshot,
    guarantees: dict[str, int],
    *,
    dry: bool = False,
) -> Preemption:
    """What the pass plans preemptions (by priority, when on) and reclaims (whenever a
    workspace has a guarantee) with: the live runs, those within guarantees, the rate limit's
    budget left."""
    database = state.store.database
    budget = inputs.preemption_max_per_minute - recent_preemptions(database, inputs.now)
    factory = None if state.live is not None else state.factory
    runs = LiveRuns(database)
    guaranteed = any(guarantees.values())
    return Preemption(
        snapshot,
        runs,
        budget,
        by_priority=inputs.preemption,
        protected=within_guarantees(runs, guarantees) if guaranteed else frozenset(),
        factory=factory,
        live=None if dry or factory is not None else state.trials,
        leaving=leaving_runs(database),
    )


class LiveRuns(Sequence[LiveRun]):
    """The live runs, read from the database when a run first needs a victim search: a pass
    in which no run does (the common case, a queue of one priority) reads none of them."""

    def __init__(self, database: Database) -> None:
        self._database = database
        self._runs: list[LiveRun] | None = None

    def _all(self) -> list[LiveRun]:
        if self._runs is None:
            self._runs = read_live_runs(self._database)
        return self._runs

    @overload
    def __getitem__(self, index: int) -> LiveRun: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[LiveRun]: ...

    def __getitem__(self, index: int | slice) -> LiveRun | Sequence[LiveRun]:
        return self._all()[index]

    def __len__(self) -> int:
        return len(self._all())


def pass_context(
    store: Store,
    max_pending_evaluations: int,
    usage: Mapping[str, Usage],
    *,
    backfill: bool = True,
) -> PassContext:
    return PassContext(
        workspaces={w.name: w for w in store.workspaces.all()},
        use_by_workspace=use_by_workspace(store.database),
        live_by_run=live_by_run(store.database),
        max_pending_evaluations=max_pending_evaluations,
        usage=usage,
        backfill=backfill,
    )


def session_over(state: PassState, snapshot: ClusterSnapshot) -> EngineSession | None:
    """A session over the live state brought up to `snapshot`; None with a fake engine (`plan`
    builds one from the snapshot). The caller holds `state.lock`."""
    if state.live is None:
        return None
    state.live.update(snapshot)
    return PlacementSession(live=state.live)


def plan(
    items: Sequence[Item],
    unstarted: Sequence[Unstarted],
    snapshot: ClusterSnapshot,
    now: datetime,
    context: PassContext,
    factory: SessionFactory,
    seconds: float,
    stopping: Callable[[], bool] = _never,
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
        if context.preemption is not None:
            context.preemption.taken.append(reshaped.placement)
    decisions, cut = decide_within(items, session, now, context, seconds, stopping)
    if reshaped is not None:
        decisions.reshaped.append(reshaped)
    return decisions, cut
