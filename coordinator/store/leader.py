"""One leader places, standbys wait: a lease row in PostgreSQL and a fencing epoch.

Several coordinators may serve one PostgreSQL database; exactly one leads (opens the store,
runs the scheduler, answers the API) and the others stand by (`standby.py`). Leadership is the
one row of the `leadership` table (migration 13):

- `take` (a standby, every `TAKE_EVERY_SECONDS`): in a transaction holding the writers' lock
  (`dialect.WRITE_LOCK`, which every write of the old leader holds too), when there is no row,
  or its lease ran out by the database's clock, or the old leader's lease session is gone, the
  row gets `epoch + 1`, this process as holder, its URL, and a lease. The new epoch is this
  leader's fence: every write it makes reads the epoch in its own transaction
  (`dialect.pg_begin`) and fails with `Deposed` once another has taken over, so an old leader
  that still believes it leads (paused, partitioned, its lease connection dead) commits
  nothing after the takeover.
- `renew` (the leader, every third of the lease): the row's lease moves on only while its
  epoch is still this leader's; otherwise the leader is deposed and steps down (`step_down`:
  exit 75, as kube-scheduler exits when it loses its lease; the service manager starts it
  again, as a standby).
- The leader also holds the session advisory lock `COORDINATOR_LOCK` on its lease connection
  and says so in the row (`session_lock`). The server frees that lock the moment the session
  ends (kill -9, the host gone: the socket closes), so a standby that can take it knows the
  leader is gone and takes over at once instead of waiting out the lease.

Every statement here runs on a connection of its own (never the writer's), with
`lock_timeout` (a standby's `take` never hangs behind a paused leader's transaction) and
`idle_in_transaction_session_timeout` about the lease (which the store's connections get too:
a paused leader's open transaction is cut, and its locks freed, about a lease later).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from . import dialect
from .lock import lease_session
from .migrations import LEADERSHIP_TABLE, migration

log = logging.getLogger("astraeus.coordinator")

EX_TEMPFAIL = 75
"""The exit status of a leader that steps down (sysexits.h: try again later)."""

TAKE_EVERY_SECONDS = 1.0
"""How often a standby tries to take the lease."""

LOCK_TIMEOUT_SECONDS = 1.0
"""How long a statement on the lease connection waits for a lock (the writers' lock behind a
paused leader's open transaction, the row behind another's `take`) before giving up this try."""

_NOW = "extract(epoch from clock_timestamp())"
"""The database's clock, in seconds: every coordinator reads leases by the same clock."""

_COLUMNS = f"epoch, holder, url, expires_at - {_NOW}, session_lock"


@dataclass(frozen=True)
class Leader:
    """The lease row as a standby reads it."""

    epoch: int
    holder: str
    url: str | None
    expires_in: float
    """Seconds until its lease runs out, by the database's clock (negative: it has)."""
    session_lock: bool
    """Whether the holder says it holds `COORDINATOR_LOCK` on its lease session."""


def this_holder() -> str:
    """How the lease row and the logs name this process: its host and pid."""
    return f"{socket.gethostname()} pid {os.getpid()}"


def session_settings(lease_seconds: float) -> str:
    """SQL for a coordinator's PostgreSQL sessions: an open transaction left idle for about a
    lease (its process paused or cut off) is ended by the server, its locks freed."""
    return f"SET idle_in_transaction_session_timeout = {int(lease_seconds * 1000)}"


class Leadership:
    """This process's side of the lease, on a connection of its own (`url`: the database)."""

    def __init__(
        self,
        url: str,
        *,
        advertise: str | None,
        lease_seconds: float,
        holder: str | None = None,
    ) -> None:
        self.url = url
        self.shown = dialect.shown(url)
        """The database as logs name it (no password)."""
        self.advertise = advertise
        """The URL clients should use to reach this coordinator (written in the row)."""
        self.lease_seconds = lease_seconds
        self.holder = holder or this_holder()
        self.epoch: int | None = None
        """This leader's epoch, once `take` won."""
        self.renewed_at = 0.0
        """`time.monotonic()` when the last `take` or `renew` that succeeded was sent: the
        lease lasts at least `lease_seconds` from then, by any clock."""
        self._conn: Any = None
        self._locked = False
        """Whether this session holds `COORDINATOR_LOCK`."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the connection --------------------------------------------------------------------

    def _connection(self) -> Any:
        """The lease session, opened (again) as needed: a new one holds no lock yet."""
        if self._conn is not None and not (self._conn.closed or self._conn.broken):
            return self._conn
        self._drop()
        conn = dialect.pg_connect(self.url, application=f"astraeus-coordinator {self.holder}"[:63])
        try:
            conn.execute(
                f"SET lock_timeout = {int(LOCK_TIMEOUT_SECONDS * 1000)};"
                f" {session_settings(self.lease_seconds)}".encode()
            )
        except Exception:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
        self._conn = None
        self._locked = False

    def close(self) -> None:
        """End the lease session (the server frees its lock)."""
        self.stop_renewing()
        self._drop()

    # -- reading ---------------------------------------------------------------------------

    def current(self) -> Leader | None:
        """The lease row, or None before any coordinator led (or before the table exists)."""
        conn = self._connection()
        if not self._table_exists(conn):
            return None
        return self._row(conn, lock=False)

    @staticmethod
    def _table_exists(conn: Any) -> bool:
        return bool(conn.execute("SELECT to_regclass('leadership') IS NOT NULL").fetchone()[0])

    @staticmethod
    def _row(conn: Any, *, lock: bool) -> Leader | None:
        sql = f"SELECT {_COLUMNS} FROM leadership WHERE id = 1"  # noqa: S608 - constants
        found = conn.execute(sql + (" FOR UPDATE" if lock else "")).fetchone()
        if found is None:
            return None
        epoch, holder, url, expires_in, session_lock = found
        return Leader(int(epoch), holder, url, float(expires_in), bool(session_lock))

    def _try_lock(self, conn: Any) -> bool:
        if not self._locked:
            taken = conn.execute("SELECT pg_try_advisory_lock(%s)", (dialect.COORDINATOR_LOCK,))
            self._locked = bool(taken.fetchone()[0])
        return self._locked

    def _unlock(self, conn: Any) -> None:
        if self._locked:
            conn.execute("SELECT pg_advisory_unlock(%s)", (dialect.COORDINATOR_LOCK,))
            self._locked = False

    def _free(self, row: Leader | None, conn: Any) -> bool:
        """Whether the lease may be taken: none yet, run out, or its holder's session gone
        (it said it held the coordinator lock, and this session could take that lock)."""
        if row is None or row.expires_in < 0:
            return True
        return row.session_lock and self._try_lock(conn)

    def lease_session(self) -> str | None:
        """The session holding the coordinator lock, as `lock.lease_session` names it."""
        return lease_session(self._connection())

    # -- a standby -------------------------------------------------------------------------

    def take(self) -> int | Leader | None:
        """Try to become the leader: the new epoch if this process now leads; otherwise the
        leader as the row names it (None: no row yet, and another process was making it).
        Raises psycopg's or the dialect's errors when the database cannot be reached; a lock
        that did not come within `LOCK_TIMEOUT_SECONDS` is a try that did not win."""
        if self.epoch is not None:
            return self.epoch
        conn = self._connection()
        exists = self._table_exists(conn)
        row = self._row(conn, lock=False) if exists else None
        if exists and not self._free(row, conn):
            if self._locked and row is not None and not row.session_lock:
                self._unlock(conn)  # the leader has not taken it yet: leave it to the leader
            return row
        sent = time.monotonic()
        try:
            won = self._take_in_lock(conn, exists)
        except BaseException as error:
            with contextlib.suppress(Exception):
                conn.execute("ROLLBACK")
            if isinstance(error, dialect._psycopg().errors.LockNotAvailable):
                return row  # behind a paused leader's open write: the next try
            raise
        if isinstance(won, int):
            self.epoch = won
            self.renewed_at = sent
        return won

    def _take_in_lock(self, conn: Any, exists: bool) -> int | Leader | None:
        """In the writers' lock (the caller rolls back on any error): the lease checked again
        and taken, or the leader found."""
        conn.execute(f"BEGIN; SELECT pg_advisory_xact_lock({dialect.WRITE_LOCK})".encode())
        if not exists:
            for statement in dialect.split_statements(migration(13, postgresql=True)):
                conn.execute(statement.encode())
        row = self._row(conn, lock=True)
        if not self._free(row, conn):
            conn.execute("ROLLBACK")
            return row
        epoch = (row.epoch if row is not None else 0) + 1
        self._try_lock(conn)  # free unless a paused old leader's session still holds it
        conn.execute(
            "INSERT INTO leadership (id, epoch, holder, url, expires_at, since,"  # noqa: S608
            f" session_lock) VALUES (1, %s, %s, %s, {_NOW} + %s, {_NOW}, %s)"
            " ON CONFLICT (id) DO UPDATE SET epoch = excluded.epoch,"
            " holder = excluded.holder, url = excluded.url,"
            " expires_at = excluded.expires_at, since = excluded.since,"
            " session_lock = excluded.session_lock",
            (epoch, self.holder, self.advertise, self.lease_seconds, int(self._locked)),
        )
        conn.execute("COMMIT")
        return epoch

    # -- the leader ------------------------------------------------------------------------

    def renew(self) -> bool:
        """Move this leader's lease on (and its URL, and whether it now holds the coordinator
        lock); False when the row holds another epoch: deposed. Raises when the database
        cannot be reached (the session is dropped: the next try opens another)."""
        if self.epoch is None:
            raise RuntimeError("renew() before take() won")
        sent = time.monotonic()
        try:
            conn = self._connection()
            self._try_lock(conn)
            renewed = conn.execute(
                f"UPDATE leadership SET expires_at = {_NOW} + %s, url = %s,"  # noqa: S608
                " session_lock = %s WHERE id = 1 AND epoch = %s",
                (self.lease_seconds, self.advertise, int(self._locked), self.epoch),
            )
        except Exception:
            self._drop()
            raise
        if renewed.rowcount != 1:
            return False
        self.renewed_at = sent
        return True

    def lease_left(self) -> float:
        """Seconds this leader's lease surely lasts still, by this process's own clock."""
        return self.renewed_at + self.lease_seconds - time.monotonic()

    def resign(self) -> None:
        """On a clean stop: end the lease now (renewing stopped first, so no renewal extends it
        again), so a standby takes over at its next try."""
        self.stop_renewing()
        if self.epoch is None:
            return
        with contextlib.suppress(Exception):
            self._connection().execute(
                f"UPDATE leadership SET expires_at = {_NOW} - 1"  # noqa: S608 - a constant
                " WHERE id = 1 AND epoch = %s",
                (self.epoch,),
            )

    def start_renewing(self, deposed: Callable[[str], None]) -> None:
        """Renew every third of the lease on a thread of its own. `deposed(line)` is called
        (once; it is expected to end the process) when the row holds another epoch, or when
        no renewal succeeded for a whole lease: a leader that cannot prove its lease stops."""
        self._thread = threading.Thread(
            target=self._renewing, args=(deposed,), name="leader-lease", daemon=True
        )
        self._thread.start()

    def stop_renewing(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(self.lease_seconds)
        self._thread = None

    def _renewing(self, deposed: Callable[[str], None]) -> None:
        interval = self.lease_seconds / 3
        while not self._stop.wait(interval):
            try:
                if self.renew():
                    continue
            except Exception as error:  # the database out of reach: try again, until expiry
                if self.lease_left() > 0:
                    log.warning("cannot renew the leader's lease (%s); trying again", error)
                    continue
                deposed(
                    f"lease lost: not renewed for {self.lease_seconds:g} s ({error}); stepping down"
                )
                return
            deposed(self.deposed_line())
            return

    def expired_line(self) -> str:
        """Why a leader whose lease ran out by its own clock steps down: deposed, when the row
        names another epoch already; else the lease lost."""
        row = self.current()
        if row is not None and row.epoch != self.epoch:
            return f"deposed: {row.holder} leads at epoch {row.epoch}; stepping down"
        return f"lease lost: not renewed for {self.lease_seconds:g} s; stepping down"

    def deposed_line(self) -> str:
        """`deposed: <holder> leads at epoch N; stepping down`, as far as the row says."""
        try:
            row = self.current()
        except Exception:  # the line is still worth writing
            row = None
        if row is None:
            return f"deposed: no coordinator leads (this one led at epoch {self.epoch});" + (
                " stepping down"
            )
        return f"deposed: {row.holder} leads at epoch {row.epoch}; stepping down"


def step_down(line: str) -> NoReturn:
    """End this process at once with `EX_TEMPFAIL`, writing nothing more anywhere (no
    cleanup, no last commit: kube-scheduler exits the same way on a lost lease). The service
    manager starts it again; it comes back as a standby."""
    log.error("%s", line)
    for handler in logging.getLogger().handlers:
        with contextlib.suppress(Exception):
            handler.flush()
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    os._exit(EX_TEMPFAIL)


__all__ = [
    "EX_TEMPFAIL",
    "LEADERSHIP_TABLE",
    "Leader",
    "Leadership",
    "session_settings",
    "step_down",
    "this_holder",
]
