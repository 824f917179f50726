"""The writer thread: every write of the running service, one job at a time, in order.

The service's event loop never waits on a commit: a request handler (or the scheduler) sends
a job (a plain function that writes through `Database.write()`) to this thread through a
queue, and awaits its result. One thread owns the write connection, so writes never contend
inside the process, and a job that reads, checks and writes runs whole before the next one
starts. Reads run on the caller's thread, each thread on a read connection of its own.

A job's exception (a `StorageError`, a constraint, an `ApiError` a check raised) is raised to
whoever awaits it; the thread itself goes on with the next job. Stopping drains the queue:
every job sent before `stop` runs before the thread ends.

`delay` says how far behind the thread runs: how long ago the oldest job not finished yet was
sent (the report service refuses a report that would wait longer than it may, `reports.py`).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

Job = tuple[Callable[[], Any], Future[Any]]


class Writer:
    """A thread fed by a queue of jobs; `submit` returns a future of the job's result."""

    def __init__(self, name: str) -> None:
        self._name = name
        self.name = name
        """The thread's name."""
        self._queue: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        """Jobs in order; None (put by `stop`) ends the thread after those before it."""
        self._thread: threading.Thread | None = None
        self._sent: deque[float] = deque()
        """When each job not finished yet was sent (`time.monotonic`), the oldest first."""
        self._ident: int | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None

    def here(self) -> bool:
        """Whether the caller runs on the writer thread."""
        return self._ident is not None and threading.get_ident() == self._ident

    def start(self) -> None:
        if self._thread is not None:
            return
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._work, args=(ready,), name=self._name, daemon=True
        )
        self._thread.start()
        ready.wait()

    def submit(self, job: Callable[[], T]) -> Future[T]:
        """Queue `job`; its future holds what it returns or raises."""
        future: Future[T] = Future()
        self._put(job, future)
        return future

    def _put(self, job: Callable[[], Any], future: Future[Any]) -> None:
        self._sent.append(time.monotonic())
        self._queue.put((job, future))

    def delay(self) -> float:
        """Seconds since the oldest job not finished yet was sent (0 when none waits): what a
        job sent now waits at least, behind it."""
        try:
            return max(0.0, time.monotonic() - self._sent[0])
        except IndexError:
            return 0.0

    async def run(self, job: Callable[[], T]) -> T:
        """Run `job` on the writer thread and await it; inline when no writer runs (scripts,
        tests that call the store directly, the moments before start and after stop)."""
        if self._thread is None or self.here():
            return job()
        return await asyncio.wrap_future(self.submit(job))

    async def run_in_turn(self, jobs: Sequence[Callable[[], T]]) -> list[T]:
        """Run `jobs` one after another and await their results. Each is queued by the writer
        thread as the one before it ends, behind whatever was sent meanwhile (a report's write
        waits for one job, not all of them), with no trip back to the event loop in between.
        The first that raises stops the rest; so does cancelling the wait (the job running then
        still finishes whole)."""
        if self._thread is None or self.here():
            return [job() for job in jobs]
        turns = _InTurn(self._put, jobs)
        self._put(turns.next, Future())
        return await asyncio.wrap_future(turns.done)

    def stop(self) -> None:
        """Run every job queued so far, then end the thread (waiting for it)."""
        thread = self._thread
        if thread is None:
            return
        self._thread = None  # from now on a job runs where it is sent, after these
        self._queue.put(None)
        if threading.get_ident() != thread.ident:
            thread.join()
        self._ident = None

    def _work(self, ready: threading.Event) -> None:
        self._ident = threading.get_ident()
        ready.set()
        while True:
            item = self._queue.get()
            if item is None:
                return
            try:
                _run(*item)
            finally:
                self._sent.popleft()
            del item  # what the job holds is let go now, not when the next one comes


def _run(job: Callable[[], Any], future: Future[Any]) -> None:
    """One job, its result or exception into its future."""
    if not future.set_running_or_notify_cancel():
        return  # its request went away before it started: nothing is written
    try:
        result = job()
    except BaseException as error:
        future.set_exception(error)
    else:
        future.set_result(result)


class _InTurn(Generic[T]):
    """`Writer.run_in_turn`'s jobs, each queued as the one before it ends. A plain object, not a
    function that queues itself: such a closure is a reference cycle, which would keep the jobs
    (a pass's rows and explanations) alive until the collector's next full pass, and frozen
    with the rest after a pass (`gc_policy.py`) until long after."""

    def __init__(
        self, put: Callable[[Callable[[], Any], Future[Any]], None], jobs: Sequence[Callable[[], T]]
    ) -> None:
        self._put = put
        self._jobs = list(jobs)
        self._index = 0
        self.results: list[T] = []
        self.done: Future[list[T]] = Future()

    def next(self) -> None:
        """Run the next job (on the writer thread); queue the one after it."""
        if self.done.cancelled():
            return
        if self._index == len(self._jobs):
            # Let go of the jobs before the waiter resumes: this object is still held by the
            # writer thread until its turn ends, which may come after the waiter has moved on.
            self._jobs = []
            self.done.set_result(self.results)
            return
        job = self._jobs[self._index]
        self._index += 1
        try:
            self.results.append(job())
        except BaseException as error:
            self._jobs = []
            self.done.set_exception(error)
            return
        self._put(self.next, Future())
