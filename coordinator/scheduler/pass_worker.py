"""A scheduler pass computed in a separate process.

The engine is pure Python: computed in a thread of the service, it holds the GIL, and every
report the event loop answers meanwhile waits for it at each database call. In its own process
the pass has a core of its own. The worker reads what it needs from the database (committed
data only: as WAL readers do, or PostgreSQL's sessions of their own) and sends back only the
decisions; the service commits them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

from astraeus.coordinator.machine_records import MachineRecords
from astraeus.coordinator.store import Store

from .compute import PassInputs, PassState, compute_pass, warm
from .gc_policy import GcPolicy, passes_only
from .pass_rows import PassRows, as_rows

WORKER_NICENESS = 10
"""Added to the pass worker's niceness."""

_OPEN: dict[str, PassState] = {}
"""The worker's store and what it keeps between passes over it (one worker serves one file)."""

_GC = GcPolicy()
"""The worker process's passes, settled by `compute_pass` once the live state is current."""


def start_worker(parent: int) -> None:
    """Run in the worker at start: a lower CPU priority, so on a busy machine the service's
    event loop (reports, API) gets a core first and passes take what is left; and watch the
    parent. Ctrl-C reaches the whole foreground process group: the service decides when the
    worker stops, so the worker ignores SIGINT (no KeyboardInterrupt traceback). Its passes
    are its only collections (`gc_policy.passes_only`)."""
    passes_only()
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


def worker_pass(
    db: str, inputs: PassInputs, access_labels: tuple[str, ...] = ("pool",)
) -> tuple[PassRows, bool]:
    """`compute_pass` over the database `db` (a SQLite file's path, or a PostgreSQL URL) as
    committed now, in this process: the store is opened once and its machines reloaded from
    the database each pass. The decisions come back as
    the rows the store writes (`as_rows`)."""
    state = _state(db, access_labels)
    try:
        state.records.reload()
        outcome, cut = compute_pass(state, inputs)
    except BaseException:
        _GC.failed()
        raise
    return as_rows(outcome), cut


def worker_warm(db: str, inputs: PassInputs, access_labels: tuple[str, ...] = ("pool",)) -> None:
    """At the service's start, in this process: read the machines and build the live state as
    a pass would (`compute.warm`), deciding nothing. Asked of the worker as soon as the service
    has opened the file, so the worker's reading overlaps the service's own (on a second core)
    instead of following it: without it the first pass after a start read and built everything
    again before it could place anything (at 20,000 machines 5-6 s of CPU after the service's
    own 6 s). The first pass then reads only the rows changed since."""
    state = _state(db, access_labels)
    state.records.reload()
    warm(state, inputs)
    if state.gc is not None:
        state.gc.settle()


def _state(db: str, access_labels: tuple[str, ...]) -> PassState:
    """The worker's store over `db` and what it keeps between passes, opened at first use."""
    if db not in _OPEN:
        store = Store.open(db)
        _OPEN[db] = PassState(store, MachineRecords(store, access_labels), gc=_GC)
    return _OPEN[db]
