"""The database: a SQLite file (WAL mode, the default) or a PostgreSQL server
(`database_url`); numbered migrations, one writer, each write in a transaction that holds the
writers' lock (`BEGIN IMMEDIATE`; `dialect.pg_begin`). Where the engines differ: `dialect.py`.

A write that fails because of the storage (disk full, a read-only file, an I/O error) rolls back
whole and raises `StorageError`; the fault is kept until a write succeeds again (`faults.py`), and
a full disk's or an I/O error's until the folder takes new data again (`ROOM_AGAIN_BYTES`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import sqlite_utils

from . import dialect
from .dialect import Connection, PgConnection
from .faults import (
    REOPEN,
    SQLITE_FULL,
    SQLITE_IOERR,
    SQLITE_READONLY,
    Fault,
    StorageError,
    storage_problem,
)
from .migrations import MIGRATIONS, migration
from .writer import Writer

T = TypeVar("T")

log = logging.getLogger(__name__)

PROBE_EVERY_SECONDS = 1.0
"""While a fault lasts, `check` tries a write at most this often."""

ROOM_AGAIN_BYTES = 256 * 1024
"""A `disk full` or I/O-error fault ends only once the database's folder takes this much new
data again (`_room_again`): on a full disk, or past a file-size limit, a small write that fits
in pages SQLite already holds still succeeds while the next one that needs a new page fails, so
a success alone would end the fault and bring it back from one write to the next."""

Row = dialect.Row


class Database:
    """Owns the one write connection, and a read connection per thread, to the same file
    (or PostgreSQL database: `location` is then its `postgresql://` URL).

    Every write happens inside `write()`, one at a time. While the service runs, the writer
    thread (`start_writer`, `writer.py`) does the service's writes: the event loop sends it
    whole jobs with `await run(fn, ...)` and never waits on a commit. Without it (tools, tests
    calling the store directly) a write runs on the caller's thread; one made on another thread
    while the writer runs still takes its turn (a lock) and is counted in `writes_elsewhere`
    (the service makes none: its tests check that count stays empty). Reads use a connection
    of the reading thread's own, so they see committed data only and never share a cursor.
    """

    def __init__(self, location: Path | str) -> None:
        self.postgresql = dialect.is_postgresql(location)
        self.location = str(location)
        """The file's path, or the PostgreSQL URL (`shown` for logs: no password)."""
        self.shown = dialect.shown(location)
        self._path = Path() if self.postgresql else Path(location)
        if not self.postgresql:
            make_private(self._path)
        self.fault: Fault | None = None
        """The storage fault in effect, if any."""
        self.write_failures: Counter[str] = Counter()
        """Writes refused by the storage since the start, by problem."""
        self.recovered: list[Callable[[], None]] = []
        """Called when a fault ends (the scheduler restarts its silence windows)."""
        self.closing: list[Callable[[], None]] = []
        """Called as the file closes, after the last queued write (the machines' records write
        the heartbeats they kept in memory)."""
        self._reopen = False
        self._probed = 0.0
        self._lock = threading.Lock()
        self.writer = Writer(
            f"postgresql-writer {self.shown.rpartition('/')[2]}"
            if self.postgresql
            else f"sqlite-writer {self._path.name}"
        )
        """The thread that runs the service's writes (started by the app)."""
        self.writes_elsewhere: Counter[str] = Counter()
        """Writes made on another thread while the writer ran, by thread name."""
        self.read_only = False
        """Opened read-only: the file system (or the file) takes no writes (`_connect`)."""
        self._generation = 0
        self._checked = 0.0
        """Bumped when the file is opened writable again after a read-only start: each thread
        then opens its read connection again (an immutable one would never see a write)."""
        self._writer: Any = self._connect()
        self._local = threading.local()
        self._readers: list[Any] = []
        self._readers_lock = threading.Lock()
        self._closed = False
        try:
            self._migrate()
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                self._writer.close()
            raise

    @property
    def path(self) -> Path:
        """The SQLite file (a PostgreSQL database has none: `location`)."""
        if self.postgresql:
            raise TypeError(f"{self.shown} is a PostgreSQL database, not a file")
        return self._path

    def _connect(self) -> Any:
        """A write or read connection: see `_sqlite_connect`; on PostgreSQL, a new session
        (a server that cannot be reached raises `dialect.PgStorageError`)."""
        if self.postgresql:
            return PgConnection(dialect.pg_connect(self.location))
        return self._sqlite_connect(self._path)

    def _sqlite_connect(self, path: Path) -> sqlite3.Connection:
        """A connection in WAL mode; on a file or file system that takes no writes, a read-only
        one instead, with the fault recorded (writes answer 503, reads work, and the first
        write that succeeds later ends it), as a coordinator started on a read-only file
        system should (docs/operator.md)."""
        try:
            return _writable_connection(path)
        except sqlite3.Error as error:
            found = storage_problem(error)
            if found is None or found[1] not in REOPEN or not path.exists():
                raise
            if self.fault is None:
                log.error("database %s is opened read-only: %s (%s)", path, found[0], error)
                self.fault = Fault(found[0], found[1], datetime.now(UTC), failures=0)
        self.read_only = True
        self._reopen = True  # each write first tries the file again (`_writable`)
        self._checked = time.monotonic()
        return _read_only_connection(path)

    def _writable_again(self) -> None:
        """While opened read-only, at most every `PROBE_EVERY_SECONDS`, whether the file can be
        opened for writing now (a remount): then every connection is opened again, so reads see
        what is written from now on, in this process and in one that only reads (the pass
        worker). Whether writes succeed is still for a write to say (`probe`)."""
        if time.monotonic() - self._checked < PROBE_EVERY_SECONDS:
            return
        self._checked = time.monotonic()
        try:
            _writable_connection(self._path).close()
        except sqlite3.Error:
            return
        self.read_only = False
        self._reopen = True
        self._generation += 1

    def _version(self, conn: Any) -> int:
        if self.postgresql:
            return dialect.pg_version(conn)
        return int(conn.execute("PRAGMA user_version").fetchone()[0])

    def _migrate(self) -> None:
        version = self._version(self._writer)
        if self.read_only and version < len(MIGRATIONS):
            raise StorageError(
                f"the file is read-only, and this version must first bring its schema from"
                f" {version} to {len(MIGRATIONS)}: make it writable",
                SQLITE_READONLY,
            )
        for number in range(version + 1, len(MIGRATIONS) + 1):
            with self.write() as conn:
                # In the writers' lock: another process may have migrated meanwhile.
                if self._version(conn) >= number:
                    continue
                for statement in _statements(migration(number, self.postgresql)):
                    conn.execute(statement)
                if self.postgresql:
                    dialect.pg_set_version(conn, number)  # type: ignore[arg-type]
                else:
                    conn.execute(f"PRAGMA user_version={number}")

    @property
    def _reader(self) -> Any:
        """This thread's read connection, opened on its first read."""
        if self.read_only:
            self._writable_again()
        conn: Any = getattr(self._local, "conn", None)
        if conn is not None and self._local.generation != self._generation:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
            conn = None
        if conn is None:
            if self._closed:
                raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
            conn = self._connect()
            self._local.conn = conn
            self._local.generation = self._generation
            if not self.postgresql:
                self._local.db = sqlite_utils.Database(conn)
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    def _drop_reader(self) -> None:
        """Forget this thread's read connection (PostgreSQL: its session broke); the next read
        opens another, so reads recover with the server, without a restart."""
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is None:
            return
        with self._readers_lock:
            if conn in self._readers:
                self._readers.remove(conn)
        with contextlib.suppress(sqlite3.Error):
            conn.close()

    def _pg_read(self, read: Callable[[Any], T]) -> T:
        """A read on this thread's PostgreSQL session; one whose session broke (the server
        restarted, a failover) is tried once more on a new one. A server that still cannot
        be read raises `StorageError` (503 and `Retry-After`, as a write fault)."""
        try:
            return read(self._reader)
        except dialect.PgStorageError as error:
            if error.code not in REOPEN:
                raise StorageError(error.problem, error.code) from error
            self._drop_reader()
        try:
            return read(self._reader)
        except dialect.PgStorageError as error:
            self._drop_reader()
            raise StorageError(error.problem, error.code) from error

    @property
    def db(self) -> sqlite_utils.Database:
        """sqlite-utils over this thread's read connection, for queries (SQLite only)."""
        self._reader  # noqa: B018 - opens it on first use
        found: sqlite_utils.Database = self._local.db
        return found

    @property
    def schema_version(self) -> int:
        if self.postgresql:
            return self._pg_read(dialect.pg_version)
        return self._version(self._reader)

    def json_text(self, column: str, path: str) -> str:
        """SQL for the scalar at `path` of the JSON in `column` (`dialect.json_text`)."""
        return dialect.json_text(self.postgresql, column, path)

    def json_pick(self, column: str, keys: Sequence[str]) -> str:
        """SQL for a JSON object of `keys` of the JSON in `column` (`dialect.json_pick`)."""
        return dialect.json_pick(self.postgresql, column, keys)

    def start_writer(self) -> None:
        """From now on, writes run on the writer thread only (see the class)."""
        self.writer.start()

    def stop_writer(self) -> None:
        """Run every write queued so far, then end the writer thread; writes run on the
        caller's thread again."""
        self.writer.stop()

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` on the writer thread, awaited: a job that writes (and the reads and
        checks it needs done in the same turn). Inline while no writer thread runs."""
        return await self.writer.run(lambda: fn(*args))

    async def run_in_turn(self, jobs: Sequence[Callable[[], T]]) -> list[T]:
        """Several jobs on the writer thread, one after another, others' jobs let in between
        (`Writer.run_in_turn`): a pass's commit in chunks."""
        return await self.writer.run_in_turn(jobs)

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """One write transaction: committed on success, rolled back on any exception.

        A storage fault anywhere in it (BEGIN, a statement, COMMIT) leaves nothing written and
        raises `StorageError`; other errors pass through as they are."""
        if self.writer.running and not self.writer.here():
            self.writes_elsewhere[threading.current_thread().name] += 1
        with self._lock:
            yield from self._transaction()

    def _transaction(self) -> Iterator[Connection]:
        conn: Any = None
        try:
            conn = self._writable()
            if self.postgresql:
                conn = self._pg_begin(conn)
            else:
                conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as error:
            if self.postgresql and conn is not None:
                self._rollback(conn)
            fault = self._failed(error)
            if fault is None:
                raise
            raise fault from error
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException as error:
            # SQLite may have rolled back already (a full disk, an I/O error): only roll back
            # what is still open, so the original error is the one raised.
            self._rollback(conn)
            fault = self._failed(error) if isinstance(error, sqlite3.Error) else None
            if fault is None:
                raise
            raise fault from error
        if self.fault is not None and self._room_again():
            self._recover()

    def _pg_begin(self, conn: Any) -> Any:
        """Open a write transaction on PostgreSQL; a session found broken (the server
        restarted, the session was ended) has written nothing yet: it is replaced by a new one
        at once, once, before the transaction counts as failed."""
        try:
            dialect.pg_begin(conn)
            return conn
        except dialect.PgStorageError as error:
            if error.code not in REOPEN:
                raise
        self._rollback(conn)
        self._reopen = True
        conn = self._writable()
        dialect.pg_begin(conn)
        return conn

    @staticmethod
    def _rollback(conn: Any) -> None:
        """Roll back what is still open, if the connection can still say (a PostgreSQL session
        that broke has nothing open: the server rolled it back)."""
        with contextlib.suppress(sqlite3.Error):
            if conn.in_transaction:
                conn.execute("ROLLBACK")

    def _room_again(self) -> bool:
        """Whether a write that succeeded may end the fault in effect. After a full disk or an
        I/O error, only once the database's folder takes `ROOM_AGAIN_BYTES` of new data again
        (a file written and removed beside the database): a small write that fits in space
        SQLite already holds succeeds while the next that needs more fails. Other faults
        (read-only, permission) end at the first success; so does one of a server."""
        assert self.fault is not None  # noqa: S101 - only called while a fault is recorded
        if self.postgresql or self.fault.code not in (SQLITE_FULL, SQLITE_IOERR):
            return True
        trial = self._path.with_name(self._path.name + ".room")
        try:
            with trial.open("wb") as out:
                out.write(bytes(ROOM_AGAIN_BYTES))
                out.flush()
        except OSError:
            return False
        finally:
            with contextlib.suppress(OSError):
                trial.unlink()
        return True

    def _writable(self) -> Any:
        """The write connection, opened again first after a fault that may have left it stuck
        (on PostgreSQL: a session that broke, or one opened on a read-only server)."""
        if self._reopen:
            with contextlib.suppress(sqlite3.Error):
                self._writer.close()
            was_read_only, self.read_only = self.read_only, False
            self._writer = self._connect()  # may raise: the next write tries again
            self._reopen = False
            if was_read_only and not self.read_only:
                self._generation += 1  # readers opened read-only see writes only when reopened
        return self._writer

    def _failed(self, error: sqlite3.Error) -> StorageError | None:
        """A `StorageError` for a storage fault (recorded, counted, logged once per fault);
        None for any other error, which is raised as it is."""
        found = dialect.problem(error)
        if found is None:
            return None
        problem, code = found
        self.write_failures[problem] += 1
        self._reopen = self._reopen or code in REOPEN
        if self.fault is None or self.fault.problem != problem:
            log.error("database %s is not writable: %s (%s)", self.shown, problem, error)
            self.fault = Fault(problem, code, datetime.now(UTC))
        else:
            self.fault = replace(self.fault, failures=self.fault.failures + 1)
        return StorageError(problem, code)

    def _recover(self) -> None:
        assert self.fault is not None  # noqa: S101 - only called while a fault is recorded
        log.warning(
            "database %s is writable again after %d failed writes (%s)",
            self.shown,
            self.fault.failures,
            self.fault.problem,
        )
        self.fault = None
        for listener in self.recovered:
            listener()

    def probe(self) -> Fault | None:
        """Try a small write now; the fault in effect afterwards (None: writable)."""
        self._probed = time.monotonic()
        with contextlib.suppress(StorageError), self.write() as conn:
            conn.execute(
                "INSERT INTO write_probe (id, at) VALUES (1, ?)"
                " ON CONFLICT (id) DO UPDATE SET at = excluded.at",
                (datetime.now(UTC).isoformat(),),
            )
        return self.fault

    def check(self) -> Fault | None:
        """The fault in effect; while there is one, first a write is tried again (at most once
        every `PROBE_EVERY_SECONDS`), so a cleared fault ends without waiting for traffic."""
        if self.fault is not None and time.monotonic() - self._probed >= PROBE_EVERY_SECONDS:
            return self.probe()
        return self.fault

    def read(self, sql: str, params: tuple[object, ...] | dict[str, object] = ()) -> list[Row]:
        """Rows as dicts, through sqlite-utils on the read connection (psycopg's dict rows on
        PostgreSQL)."""
        if self.postgresql:
            return self._pg_read(lambda conn: conn.dicts(sql, params))
        return list(self.db.query(sql, params))

    def tuples(
        self, sql: str, params: tuple[object, ...] | dict[str, object] = ()
    ) -> list[tuple[Any, ...]]:
        """Rows as plain tuples, straight from the engine (no dict per row: for reads of every
        machine each pass)."""
        if self.postgresql:
            return self._pg_read(lambda conn: list(conn.execute(sql, params).fetchall()))
        return list(self._reader.execute(sql, params).fetchall())

    def read_one(self, sql: str, params: tuple[object, ...] | dict[str, object] = ()) -> Row | None:
        rows = self.read(sql, params)
        return rows[0] if rows else None

    def close(self) -> None:
        """Drain and stop the writer thread, call `closing`, then close every connection."""
        self.stop_writer()
        if not self._closed:
            for listener in self.closing:
                listener()
        self._closed = True
        with self._readers_lock:
            readers, self._readers = self._readers, []
        for conn in readers:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        self._local = threading.local()
        with contextlib.suppress(sqlite3.Error):
            self._writer.close()


def make_private(path: Path) -> None:
    """The database file, its WAL and shared memory readable by this user only, whatever the
    umask: they hold users' environment values and token hashes. SQLite gives the WAL and SHM
    files it creates the database file's mode; ones left from before are fixed here too. A file
    that cannot be changed (a read-only file system) is left as it is, with a warning."""
    if not path.exists():
        with contextlib.suppress(FileExistsError):
            os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
    for name in (path.name, f"{path.name}-wal", f"{path.name}-shm", f"{path.name}-journal"):
        part = path.with_name(name)
        try:
            if part.exists() and part.stat().st_mode & 0o077:
                os.chmod(part, 0o600)
        except OSError as error:
            log.warning("cannot make %s private (mode 0600): %s", part, error)


def _statements(script: str) -> list[str]:
    """Split a migration into statements (executescript would commit on its own)."""
    return dialect.split_statements(script)


def _writable_connection(path: Path) -> sqlite3.Connection:
    # isolation_level=None: transactions are opened explicitly, never implicitly.
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        # NORMAL survives a killed process (not a power loss of the last commits) and is fast.
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=5000")
        conn.execute("PRAGMA user_version").fetchone()  # opens the file: a fault shows here
    except sqlite3.Error:
        conn.close()
        raise
    return conn


def _read_only_connection(path: Path) -> sqlite3.Connection:
    """Reads of a file no process can write now: SQLite's read-only mode, which still reads a
    WAL left beside the file; where it cannot (a WAL database whose shared-memory file cannot
    be made on this file system) and no WAL is left, as immutable, which is exact then."""
    uri = f"file:{path.resolve()}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA user_version").fetchone()
    except sqlite3.Error:
        if Path(f"{path}-wal").exists() and Path(f"{path}-wal").stat().st_size > 0:
            raise
        conn = sqlite3.connect(
            uri + "&immutable=1", uri=True, isolation_level=None, check_same_thread=False
        )
    conn.execute("PRAGMA busy_timeout=5000")
    return conn
