"""The scheduler loop: the only writer of assignments.

A pass runs when something changed (debounced; a submission skips the debounce, so on an idle
scheduler a run that fits is placed as soon as a pass can run) and at least every
`pass_interval_seconds`. Each pass marks tasks on long-silent machines Lost, takes one snapshot,
decides in a worker process (`worker.py`: the engine holds the GIL; in a process of its own,
reports keep being answered), and commits in transactions of whole placements.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from datetime import datetime, timedelta

from astraeus.coordinator.metrics import Metrics
from astraeus.coordinator.placement import ClusterSnapshot, Placement, PlacementSession
from astraeus.coordinator.placement.live import LiveState
from astraeus.coordinator.reports import Reports
from astraeus.coordinator.settings import Settings
from astraeus.coordinator.store import Store
from astraeus.coordinator.store.commit import commit_pass, drop_unused_explanations
from astraeus.coordinator.store.faults import StorageError
from astraeus.coordinator.store.queue import read_queue
from astraeus.coordinator.store.reshape import Unstarted, commit_reshape, read_unstarted
from astraeus.shared import RunSpec, reasons
from astraeus.shared.clock import Clock
from astraeus.shared.reasons import ReasonKind

from .decide import PassContext, PassOutcome, SessionFactory, make_explanations
from .items import Candidate, Item, Parsed, Waiting, candidate, queue_items
from .memo import PassMemo
from .snapshot import Views, build_snapshot
from .worker import compute_pass, pass_context, plan, start_worker
from .written import Decided, written

log = logging.getLogger(__name__)

COMMIT_CHUNK = 100
"""Placements (and explanations) per write transaction."""

FLUSH_CHUNK = 500
"""Heartbeats written per transaction before each pass."""

STOP_WAIT_SECONDS = 5.0
"""How long a stop waits for the pass worker to end after SIGTERM."""

UNFREEZE_EVERY = 100
"""Passes between handing frozen objects back to the garbage collector (`_settle_garbage`)."""


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
        reports: Reports,
        *,
        session_factory: SessionFactory | None = None,
        pool: ProcessPoolExecutor | None = None,
    ) -> None:
        """`pool`: the pass worker, when one was started before (`worker_pool`)."""
        self._session_factory = session_factory or PlacementSession
        self._live = LiveState() if session_factory is None else None
        """The placement state kept between passes and dry runs of this process."""
        self._live_lock = threading.Lock()
        self._memo = PassMemo()
        self._last_committed = False
        """The last pass's decisions were all committed: a pass with no change since may
        decide nothing (`memo`)."""
        self._pool: ProcessPoolExecutor | None = None
        if session_factory is None and settings.pass_process:
            self._pool = pool or worker_pool()
        self._settings = settings
        self._store = store
        self._reports = reports
        self._records = reports.records
        self._clock = clock
        self._metrics = metrics
        self._wake = asyncio.Event()
        self._now = asyncio.Event()
        """A submission asked for the next pass without the debounce (it cuts one short)."""
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._asks: dict[int, Parsed] = {}
        self._views = Views()
        """Machine views kept between snapshots (`snapshot.Views`)."""
        self._stopping = threading.Event()
        self._passes = 0
        self.heard_since = clock.now()
        """Since when this coordinator could hear reports: its start, or the end of the last
        storage fault. Silence before it is the coordinator's, never a machine's."""
        store.database.recovered.append(self._hearing_again)
        self._fault_logged: str | None = None
        self.ports = reports.ports
        """Rendezvous ports: given after each commit, taken back when an agent finds one busy."""

    @property
    def down_after(self) -> timedelta:
        return timedelta(seconds=self._settings.down_after_seconds)

    def _hearing_again(self) -> None:
        """The file takes writes again: reports refused meanwhile were no machine's fault."""
        self.heard_since = self._clock.now()
        self._fault_logged = None

    def poke(self, *, now: bool = False) -> None:
        """Ask for a pass soon: something changed that may let a run start. `now` (a new
        submission): without waiting for the debounce, so on an idle scheduler the run is placed
        within one pass of its commit; while a pass runs, the next starts as it ends."""
        if now:
            self._now.set()
        self._wake.set()

    async def run_pass(self) -> PassResult:
        """One pass, start to commit. Passes never overlap."""
        async with self._lock:
            run = self._store.database.run  # every write goes to the writer thread
            await run(self._writable)
            started = time.perf_counter()
            now = self._clock.now()
            await self._flush_seen()  # the worker reads who is Up from the file
            lost = await run(self._mark_lost, now)
            await run(self._store.reservations.expire, now)
            if self._pool is not None:
                decisions, cut = await self._decide_elsewhere(now)
            else:
                snapshot = build_snapshot(
                    self._store, self._records, now, self.down_after, self.heard_since, self._views
                )
                items = queue_items(read_queue(self._store.database), self._asks)
                unstarted = read_unstarted(self._store.database)
                context = self._context()
                outcome, cut = await self._decide(
                    items, snapshot, now, context, unstarted, remember=True
                )
                decisions = written(outcome)
            if cut:
                self.poke()  # the next pass, on a fresh snapshot, goes on down the queue
            self._last_committed = False
            committed = await self._commit(decisions, now)
            self._last_committed = True
            database = self._store.database
            await database.run(self.ports.give, database, now)
            seconds = time.perf_counter() - started
            self._metrics.observe_pass(seconds, decisions.submitted_at, now)
            return PassResult(committed, len(decisions.waiting), lost)

    def _writable(self) -> None:
        """While a storage fault is recorded, a pass first tries a small write: if it fails,
        `StorageError` (no pass until the file takes writes); if it succeeds, the fault is over
        and `heard_since` moves to now before any machine's silence is judged."""
        database = self._store.database
        if database.fault is not None:
            fault = database.probe()
            if fault is not None:
                raise StorageError(fault.problem, fault.code)

    async def _flush_seen(self) -> None:
        """Heartbeats to the file in transactions of `FLUSH_CHUNK` machines, answering
        requests in between (5,000 in one transaction would stall them)."""
        while True:
            flushed = await self._store.database.run(self._records.flush_seen, FLUSH_CHUNK)
            if flushed < FLUSH_CHUNK:
                return
            await asyncio.sleep(0)

    async def _decide_elsewhere(self, now: datetime) -> tuple[Decided, bool]:
        """The pass in the worker process; a worker that ended (killed, out of memory) is
        replaced and the pass asked of the new one, which reads the cluster from the file
        (nothing the service holds is lost with it: the file has every hold)."""
        try:
            return await self._in_worker(now)
        except BrokenProcessPool:
            if self._stopping.is_set():
                raise
            log.warning(
                "the pass worker process ended; starting another, which reads the cluster"
                " from the database"
            )
            assert self._pool is not None  # noqa: S101 - only called with a pool
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = worker_pool()
            return await self._in_worker(now)

    async def _in_worker(self, now: datetime) -> tuple[Decided, bool]:
        assert self._pool is not None  # noqa: S101 - only called with a pool
        settings = self._settings
        return await asyncio.get_running_loop().run_in_executor(
            self._pool,
            compute_pass,
            str(self._store.database.path),
            now,
            settings.down_after_seconds,
            self.heard_since,
            settings.max_pending_evaluations,
            settings.max_pass_seconds,
            settings.access_labels,
            self._last_committed,
        )

    async def _commit(self, decisions: Decided, now: datetime) -> int:
        """Commit in chunks, each its own transaction, queued by the writer thread one after
        another, so a report's write waits for one chunk at most.

        Each placement is whole in one chunk, so a crash between chunks leaves every run either
        placed or still pending, never half placed."""
        committed = 0
        database = self._store.database
        for reshaped in decisions.reshaped:
            old, placement = reshaped.old, reshaped.placement
            if await database.run(commit_reshape, database, old, placement, now):
                log.info("run %s reshaped: %s", old.row.run, placement.shape.why)
                self.poke()  # its old machines are free now
        placed, waiting = decisions.placed, decisions.waiting
        stored: dict[int, int] = {}
        chunks = [
            functools.partial(
                commit_pass,
                database,
                placed[start : start + COMMIT_CHUNK],
                waiting[start : start + COMMIT_CHUNK],
                now,
                stored,
            )
            for start in range(0, max(len(placed), len(waiting)), COMMIT_CHUNK)
        ]
        committed += sum(await database.run_in_turn(chunks))
        await database.run(drop_unused_explanations, database)
        return committed

    async def _decide(
        self,
        items: list[Item],
        snapshot: ClusterSnapshot,
        now: datetime,
        context: PassContext,
        unstarted: Sequence[Unstarted] = (),
        *,
        remember: bool = False,
    ) -> tuple[PassOutcome[Item], bool]:
        """Decide in a worker thread (with a fake engine, or for a dry run); a pass
        (`remember`) with no change since the last decides nothing (`memo`).

        Reports handled meanwhile cannot change who holds a GPU (only the commit does, and it
        skips a run cancelled meanwhile)."""
        seconds = self._settings.max_pass_seconds
        return await asyncio.to_thread(
            self._plan, items, unstarted, snapshot, now, context, seconds, remember
        )

    def _plan(
        self,
        items: list[Item],
        unstarted: Sequence[Unstarted],
        snapshot: ClusterSnapshot,
        now: datetime,
        context: PassContext,
        seconds: float,
        remember: bool,
    ) -> tuple[PassOutcome[Item], bool]:
        """`plan` over this process's live state, brought up to `snapshot` first (one thread at
        a time: a pass and dry runs may call it together)."""
        session, key = None, None
        if self._live is not None:
            with self._live_lock:
                self._live.update(snapshot)
                session = PlacementSession(live=self._live)
                key = self._memo.key(self._live, items, unstarted, context) if remember else None
            if self._last_committed and self._memo.unchanged(key):
                return PassOutcome(), False
        factory, stopping = self._session_factory, self._stopping.is_set
        found = plan(items, unstarted, snapshot, now, context, factory, seconds, stopping, session)
        if remember:
            make_explanations(found[0])
            self._memo.remember(key, *found)
        return found

    def _context(self) -> PassContext:
        return pass_context(self._store, self._settings.max_pending_evaluations)

    def _mark_lost(self, now: datetime) -> int:
        """Tasks on machines silent past the grace period become Lost. Silence counts from
        the machine's last report or `heard_since`, whichever is later (so while `heard_since`
        is within the grace period no machine is looked at)."""
        cutoff = now - timedelta(seconds=self._settings.lost_after_seconds)
        if self.heard_since >= cutoff:
            return 0
        silent = [
            (
                record.name,
                f"machine {record.name} stopped reporting at {record.last_seen.isoformat()}",
            )
            for record in self._records.all()
            if record.last_seen is not None and record.last_seen < cutoff
        ]
        return self._reports.mark_silent(silent, now) if silent else 0

    async def dry_run(self, spec: RunSpec, workspace: str) -> Placement | Waiting[Candidate]:
        """Where `spec` would go if submitted to `workspace` now, behind the queue ahead of it
        (queue rules included); nothing is stored."""
        item = candidate(spec, workspace)
        now = self._clock.now()
        snapshot = build_snapshot(
            self._store, self._records, now, self.down_after, self.heard_since, self._views
        )
        # The asks parsed before (by a pass or a dry run): 10,000 queued runs take ~0.4 s to parse.
        queue = queue_items(read_queue(self._store.database), self._asks)
        ahead: list[Candidate] = [q for q in queue if q.priority >= item.priority]
        decisions, _ = await self._decide([*ahead, item], snapshot, now, self._context())
        for placed in decisions.placed:
            if placed.item is item:
                return placed.placement
        for waiting in decisions.waiting:
            if waiting.item is item:
                return waiting
        return Waiting(item, reasons.not_evaluated(), None, ReasonKind.NOT_EVALUATED)

    async def _loop(self) -> None:
        debounce = self._settings.pass_debounce_seconds
        # The flag as well as the cancellation: before Python 3.12 `wait_for` may swallow a
        # cancellation that arrives as its inner wait ends, and the loop would go on forever.
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._settings.pass_interval_seconds)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._now.wait(), debounce)
            if self._stopping.is_set():
                return
            self._wake.clear()
            self._now.clear()
            try:
                result = await self.run_pass()
            except StorageError as error:
                self._log_fault(error)
                continue
            except Exception:
                log.exception("scheduler pass failed; retrying on the next change")
                continue
            finally:
                self._settle_garbage()
            if result.placed or result.lost:
                log.info("pass placed %d, lost %d", result.placed, result.lost)

    def _log_fault(self, error: StorageError) -> None:
        """Once per fault: the database logs each one, and passes wait for it to clear."""
        if self._fault_logged != error.problem:
            self._fault_logged = error.problem
            log.warning("scheduler passes wait: %s", error)

    def _settle_garbage(self) -> None:
        """After a pass, move what lives on (5,000 machines' reports and records, mostly) out
        of the collector's sight: its full passes otherwise walk all of it every few seconds
        under load and stall every request for hundreds of milliseconds. Every
        `UNFREEZE_EVERY` passes it is all handed back, so cycles among objects frozen while
        alive are still collected eventually."""
        self._passes += 1
        if self._passes % UNFREEZE_EVERY == 0:
            gc.unfreeze()
        else:
            gc.freeze()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="scheduler")

    async def stop(self) -> None:
        """Stop between transactions: a pass being decided is dropped (nothing of it was
        written), one being committed stops after its current chunk, whole. The pass worker
        is ended and waited for, so that the service's own connection is the file's last and
        closing it leaves no WAL behind."""
        self._stopping.set()
        self._wake.set()
        self._now.set()  # no debounce to sit out either
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._pool is not None:
            workers = multiprocessing.active_children()  # the pass worker is our only one
            self._pool.shutdown(wait=False, cancel_futures=True)
            for worker in workers:
                worker.terminate()  # it only reads: nothing is lost
            await asyncio.to_thread(_join, workers)
            self._pool = None


def worker_pool(*, start_now: bool = False) -> ProcessPoolExecutor:
    """One pass worker process. Spawned: the service has threads (sqlite, the executor), and
    forking those is unsafe. `start_now`: the process starts (and imports the engine, ~1-2 s)
    at once, not at the first pass: the service starts it before loading its own store, so the
    two overlap on a machine with two cores."""
    pool = ProcessPoolExecutor(
        1,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=start_worker,
        initargs=(os.getpid(),),
    )
    if start_now:
        pool.submit(os.getpid)
    return pool


def _join(workers: list[multiprocessing.process.BaseProcess]) -> None:
    for worker in workers:
        worker.join(STOP_WAIT_SECONDS)
