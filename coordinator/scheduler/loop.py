"""The scheduler loop: the only writer of assignments.

A pass runs when something changed (debounced; a submission skips the debounce, so on an idle
scheduler a run that fits is placed as soon as a pass can run) and at least every
`pass_interval_seconds`. Each pass marks tasks on long-silent machines Lost, takes one snapshot,
decides in a worker process (`pass_worker.py`: the engine holds the GIL; in a process of its own,
reports keep being answered) or, without one, in a thread of the service (the same
`compute.compute_pass`), and commits in transactions of whole placements.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import multiprocessing
import os
import threading
import time
import weakref
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from datetime import datetime, timedelta

from astraeus.coordinator.metrics import Metrics
from astraeus.coordinator.placement import Placement, PlacementSession
from astraeus.coordinator.placement.cache import LiveState
from astraeus.coordinator.reports import Reports
from astraeus.coordinator.settings import Settings
from astraeus.coordinator.store import Store
from astraeus.coordinator.store.commit import commit_pass, drop_unused_explanations
from astraeus.coordinator.store.faults import StorageError
from astraeus.coordinator.store.preemption import commit_preemptions
from astraeus.coordinator.store.unstarted import commit_reshape
from astraeus.coordinator.store.usage import accrue
from astraeus.shared import RunSpec, reasons
from astraeus.shared.clock import Clock, SystemClock
from astraeus.shared.machines import ForgottenMachine
from astraeus.shared.reasons import ReasonKind

from .compute import PassInputs, PassState, compute_pass, dry_pass, warm
from .gc_policy import GcPolicy
from .items import Candidate, Waiting, candidate
from .pass_rows import PassRows, as_rows
from .pass_worker import start_worker, worker_pass, worker_warm
from .queue_walk import SessionFactory

log = logging.getLogger(__name__)

COMMIT_CHUNK = 100
"""Placements (and explanations) per write transaction."""

FLUSH_CHUNK = 500
"""Heartbeats written per transaction before each pass."""

STOP_WAIT_SECONDS = 5.0
"""How long a stop waits for the pass worker to end after SIGTERM."""

_WARMING: weakref.WeakKeyDictionary[ProcessPoolExecutor, Future[None]] = weakref.WeakKeyDictionary()
"""Each pass worker's build at start (`warm_worker`), while it is under way: until it has
ended, passes over a short queue compute in the service's own process
(`Scheduler._worker_ready`)."""

SHORT_QUEUE = 100
"""Pending runs a pass may compute in the service while the pass worker still builds: a pass
over a deep queue places thousands of runs, and computed here it held reports up for ~0.9 s
(issue 17's deep queue at 5,000 machines), so it waits for the worker."""


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
        self._stopping = threading.Event()
        self._pass_state = PassState(
            store,
            reports.records,
            factory=session_factory or PlacementSession,
            live=LiveState() if session_factory is None else None,
            stopping=self._stopping.is_set,
        )
        """What this process keeps between its passes (without a worker) and dry runs."""
        self._gc = GcPolicy()
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
        self._warming: asyncio.Task[None] | None = None
        """Builds the live state at start (`compute.warm`), so the first dry run is quick."""
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
            # Usage up to now, before the queue is ordered by it (fair share).
            await run(
                accrue, self._store.database, now, self._settings.fair_share_half_life_seconds
            )
            if self._pool is not None and await self._worker_ready():
                decisions, cut = await self._decide_elsewhere(now)
            else:
                # In a thread: reports handled meanwhile cannot change who holds a GPU (only
                # the commit does, and it skips a run cancelled meanwhile).
                inputs = self._inputs(now)
                outcome, cut = await asyncio.to_thread(compute_pass, self._pass_state, inputs)
                decisions = as_rows(outcome)
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

    async def _worker_ready(self) -> bool:
        """Whether this pass goes to the pass worker: yes, unless it is still reading the
        machines at start (`warm_worker`). The service reads and builds the same at the same
        time, on the other core, for its dry runs (`start`); a pass asked of a worker still
        building waits for it (at 50,000 machines ~5 s after the service listens), so until
        the worker is done a pass over at most `SHORT_QUEUE` pending runs computes here, over
        the service's state, once that is built (a pass that comes before waits for it). The
        file is the truth for both: the worker's first pass reads what changed since its
        build."""
        warming = _WARMING.get(self._pool) if self._pool is not None else None
        if warming is None or warming.done():
            return True
        if self._store.runs.pending_more_than(SHORT_QUEUE):
            return True  # a deep queue's pass would hold this process's core: the worker's
        if self._warming is not None:
            await self.warmed()
        return warming.done()

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

    def _inputs(self, now: datetime) -> PassInputs:
        return pass_inputs(self._settings, now, self.heard_since, self._last_committed)

    async def _decide_elsewhere(self, now: datetime) -> tuple[PassRows, bool]:
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

    async def _in_worker(self, now: datetime) -> tuple[PassRows, bool]:
        assert self._pool is not None  # noqa: S101 - only called with a pool
        return await asyncio.get_running_loop().run_in_executor(
            self._pool,
            worker_pass,
            self._store.database.location,
            self._inputs(now),
            self._settings.access_labels,
        )

    async def _commit(self, decisions: PassRows, now: datetime) -> int:
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
        if decisions.preempting:
            grace = self._settings.preemption_grace_seconds
            stopped = await database.run(
                commit_preemptions, database, decisions.preempting, grace, now
            )
            if stopped:
                log.info("preempted %d runs for higher-priority ones", stopped)
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

    async def forget(self, machine: str, by: str) -> ForgottenMachine | None:
        """Forget a machine that will never return (`Reports.forget`), between passes: a pass
        deciding meanwhile could place a run on it. None when there is no such machine."""
        async with self._lock:
            now = self._clock.now()
            forgotten = await self._store.database.run(self._reports.forget, machine, now, by)
        if forgotten is not None:
            self.poke()  # its runs' other workers stop, and what waited may fit elsewhere
        return forgotten

    async def dry_run(self, spec: RunSpec, workspace: str) -> Placement | Waiting[Candidate]:
        """Where `spec` would go if submitted to `workspace` now, behind the queue ahead of it
        (queue rules included); nothing is stored."""
        item = candidate(spec, workspace)
        # The asks parsed before (by a pass or a dry run) are reused: 10,000 queued runs take
        # ~0.4 s to parse.
        inputs = self._inputs(self._clock.now())
        decisions = await asyncio.to_thread(dry_pass, self._pass_state, inputs, item)
        for placed in decisions.placed:
            if placed.item is item:
                return placed.placement
        for preempting in decisions.preempting:
            if preempting.item is item:
                text = reasons.would_preempt(len(preempting.victims), preempting.gpus)
                return Waiting(item, text, None, ReasonKind.PREEMPTING)
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
                self._gc.settle()  # after each pass, failed or not (`gc_policy.py`)
            if result.placed or result.lost:
                log.info("pass placed %d, lost %d", result.placed, result.lost)

    def _log_fault(self, error: StorageError) -> None:
        """Once per fault: the database logs each one, and passes wait for it to clear."""
        if self._fault_logged != error.problem:
            self._fault_logged = error.problem
            log.warning("scheduler passes wait: %s", error)

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._loop(), name="scheduler")
        if self._pass_state.live is not None:
            inputs = self._inputs(self._clock.now())
            self._warming = loop.create_task(
                asyncio.to_thread(warm, self._pass_state, inputs), name="warm"
            )

    async def warmed(self) -> None:
        """Wait for the live state built at start (`start`): the service listens once it is,
        so its first dry run reads a built state. A failure (a storage fault at start) is
        logged: the first dry run builds the state then, as before."""
        if self._warming is None:
            return
        try:
            await self._warming
        except Exception as error:  # the state is built by the first dry run instead
            log.warning("the live state was not built at start: %s", error)
        self._warming = None

    async def stop(self) -> None:
        """Stop between transactions: a pass being decided is dropped (nothing of it was
        written), one being committed stops after its current chunk, whole. The pass worker
        is ended and waited for, so that the service's own connection is the file's last and
        closing it leaves no WAL behind."""
        self._stopping.set()
        self._wake.set()
        self._now.set()  # no debounce to sit out either
        await self.warmed()  # a thread: it cannot be cancelled, only waited for
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


def pass_inputs(
    settings: Settings, now: datetime, heard_since: datetime, last_committed: bool = False
) -> PassInputs:
    """What a pass at `now` is asked with, from the settings."""
    return PassInputs(
        now=now,
        down_after=timedelta(seconds=settings.down_after_seconds),
        heard_since=heard_since,
        max_pending_evaluations=settings.max_pending_evaluations,
        max_seconds=settings.max_pass_seconds,
        last_committed=last_committed,
        preemption=settings.preemption == "priority",
        preemption_max_per_minute=settings.preemption_max_per_minute,
        fair_share=settings.fair_share,
        backfill=settings.backfill,
    )


def warm_worker(pool: ProcessPoolExecutor, settings: Settings, location: str) -> None:
    """Have the pass worker read the machines of the database at `location` and build its live
    state (`worker_warm`) now, deciding nothing. The service asks it as soon as it has opened
    (and migrated) the database, before reading the machines itself: the worker's reading then
    overlaps the service's (on a second core) instead of following it. Without it the first
    pass after a start read and built everything again before it could place anything (at
    20,000 machines 4-6 s after the service had listened, on a busy machine). Passes asked of
    the worker wait behind it (one process); a failure is logged, and the first pass reads the
    machines itself, as it did before."""
    now = SystemClock().now()
    inputs = pass_inputs(settings, now, now)
    try:
        warming = pool.submit(worker_warm, location, inputs, settings.access_labels)
    except (BrokenProcessPool, RuntimeError) as error:  # the first pass replaces the worker
        log.warning("the pass worker did not build its live state at start: %s", error)
        return
    _WARMING[pool] = warming
    warming.add_done_callback(_warmed_worker)


def _warmed_worker(warming: Future[None]) -> None:
    if warming.cancelled():
        return
    error = warming.exception()
    if error is not None:
        log.warning("the pass worker did not build its live state at start: %s", error)


def _join(workers: list[multiprocessing.process.BaseProcess]) -> None:
    for worker in workers:
        worker.join(STOP_WAIT_SECONDS)
