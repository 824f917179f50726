"""The scheduler loop: the only writer of assignments.

A pass runs when something changed (debounced) and at least every `pass_interval_seconds`. Each
pass marks tasks on long-silent machines Lost, takes one snapshot, decides in a worker thread (the
engine is pure, so reports keep being answered), and commits in transactions of whole placements.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from astraeus.coordinator.clock import Clock
from astraeus.coordinator.metrics import Metrics
from astraeus.coordinator.placement import ClusterSnapshot, Placement
from astraeus.coordinator.settings import Settings
from astraeus.coordinator.store import Store
from astraeus.coordinator.store.commit import (
    Waiting,
    commit_pass,
    drop_unused_explanations,
    mark_lost,
)
from astraeus.coordinator.store.queue import (
    Parsed,
    QueueItem,
    gpus_by_workspace,
    live_by_run,
    read_queue,
)

from .decide import Decisions, PassContext, SessionFactory, engine, steps
from .snapshot import build_snapshot

log = logging.getLogger(__name__)

COMMIT_CHUNK = 100
"""Placements (and explanations) per write transaction."""


@dataclass(frozen=True)
class PassResult:
    placed: int
    waiting: int
    lost: int


class Scheduler:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        clock: Clock,
        metrics: Metrics,
        *,
        session_factory: SessionFactory | None = None,
    ) -> None:
        self._session_factory = session_factory or engine()
        self._settings = settings
        self._store = store
        self._clock = clock
        self._metrics = metrics
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._asks: dict[int, Parsed] = {}
        self._stopping = threading.Event()

    @property
    def down_after(self) -> timedelta:
        return timedelta(seconds=self._settings.down_after_seconds)

    def poke(self) -> None:
        """Ask for a pass soon: something changed that may let a run start."""
        self._wake.set()

    async def run_pass(self) -> PassResult:
        """One pass, start to commit. Passes never overlap."""
        async with self._lock:
            started = time.perf_counter()
            now = self._clock.now()
            lost = self._mark_lost(now)
            self._store.reservations.expire(now)
            snapshot = build_snapshot(self._store, now, self.down_after)
            items = read_queue(self._store.database, self._asks)
            context = self._context()
            decisions = await self._decide(items, snapshot, now, context)
            committed = await self._commit(decisions, now)
            self._metrics.observe_pass(time.perf_counter() - started, decisions.placed, now)
            return PassResult(committed, len(decisions.waiting), lost)

    async def _commit(self, decisions: Decisions, now: datetime) -> int:
        """Commit in chunks, each its own transaction, so reports are answered in between.

        Each placement is whole in one chunk, so a crash between chunks leaves every run either
        placed or still pending, never half placed."""
        committed = 0
        placed, waiting = decisions.placed, decisions.waiting
        stored: dict[int, int] = {}
        for start in range(0, max(len(placed), len(waiting)), COMMIT_CHUNK):
            end = start + COMMIT_CHUNK
            committed += commit_pass(
                self._store.database, placed[start:end], waiting[start:end], now, stored
            )
            await asyncio.sleep(0)
        drop_unused_explanations(self._store.database)
        return committed

    async def _decide(
        self, items: list[QueueItem], snapshot: ClusterSnapshot, now: datetime, context: PassContext
    ) -> Decisions:
        """Decide in a worker thread: the engine is pure, and reports keep being answered.

        Reports handled meanwhile cannot change who holds a GPU (only the commit does, and it
        skips a run cancelled meanwhile)."""
        return await asyncio.to_thread(self._decide_here, items, snapshot, now, context)

    def _decide_here(
        self, items: list[QueueItem], snapshot: ClusterSnapshot, now: datetime, context: PassContext
    ) -> Decisions:
        """The pass's computation, in the worker thread; it stops early when the service does
        (nothing is committed then, so the next start simply runs the pass again)."""
        out = Decisions()
        for _ in steps(items, self._session_factory(snapshot), now, context, out):
            if self._stopping.is_set():
                raise asyncio.CancelledError
        return out

    def _context(self) -> PassContext:
        return PassContext(
            workspaces={w.name: w for w in self._store.workspaces.all()},
            gpus_by_workspace=gpus_by_workspace(self._store.database),
            live_by_run=live_by_run(self._store.database),
            max_pending_evaluations=self._settings.max_pending_evaluations,
        )

    def _mark_lost(self, now: datetime) -> int:
        """Tasks on machines silent past the grace period become Lost."""
        grace = timedelta(seconds=self._settings.lost_after_seconds)
        silent = [
            (
                record.name,
                f"machine {record.name} stopped reporting at {record.last_seen.isoformat()}",
            )
            for record in self._store.machines.all()
            if record.last_seen is not None and now - record.last_seen > grace
        ]
        return mark_lost(self._store.database, silent, now) if silent else 0

    async def dry_run(self, item: QueueItem) -> Placement | Waiting:
        """Where `item` would go now, queue rules included; nothing is stored."""
        now = self._clock.now()
        snapshot = build_snapshot(self._store, now, self.down_after)
        queue = read_queue(self._store.database)
        ahead = [q for q in queue if q.priority >= item.priority]
        decisions = await self._decide([*ahead, item], snapshot, now, self._context())
        for placed in decisions.placed:
            if placed.item is item:
                return placed.placement
        for waiting in decisions.waiting:
            if waiting.item is item:
                return waiting
        return Waiting(item, "not evaluated: the queue ahead is longer than one pass looks", None)

    async def _loop(self) -> None:
        debounce = self._settings.pass_debounce_seconds
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._settings.pass_interval_seconds)
            await asyncio.sleep(debounce)
            self._wake.clear()
            try:
                result = await self.run_pass()
            except Exception:
                log.exception("scheduler pass failed; retrying on the next change")
                continue
            if result.placed or result.lost:
                log.info("pass placed %d, lost %d", result.placed, result.lost)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="scheduler")

    async def stop(self) -> None:
        self._stopping.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
