"""Where SQLite and PostgreSQL differ, and nowhere else.

The store's SQL is written once, in the form both engines take: `?` placeholders, upserts as
`INSERT ... ON CONFLICT`, `RETURNING` instead of `lastrowid`, `coalesce(sum(x), 0)` instead
of `total(x)`, `"offset"` quoted (a reserved word in PostgreSQL), integer flags compared
(`cancel = 1`). What cannot be written once lives here:

- connecting (a file in WAL mode; a server with psycopg 3, imported only when a
  `postgresql://` URL is given, so SQLite users install nothing of PostgreSQL);
- the placeholder style (`?` becomes `%s` for psycopg) and rows as dicts (sqlite-utils;
  psycopg's `dict_row`);
- the schema's types (`INTEGER` is 32 bits in PostgreSQL: `BIGINT`; `REAL` is 4 bytes there:
  `DOUBLE PRECISION`; `INTEGER PRIMARY KEY [AUTOINCREMENT]`: an identity column, which never
  reuses an id either) and the migrations that differ beyond types (`migrations.py`:
  `POSTGRESQL_STEPS`);
- the schema's version (`PRAGMA user_version`; a one-row `schema_version` table);
- how a write transaction starts (`BEGIN IMMEDIATE` takes SQLite's write lock; PostgreSQL's
  `BEGIN` plus a transaction-scoped advisory lock serialises writers the same way, so the
  machines' change feed, whose stamps are `max + 1`, stays in commit order across processes;
  a leader's writes also read the fencing epoch there: `pg_begin`, `leader.py`);
- JSON picked out of a TEXT column (`json_extract`; `::jsonb #>>`);
- copying a SQLite file in (`transfer.py`): `COPY ... FROM STDIN`, the tables' own triggers
  off for it, identity columns moved past the ids copied;
- which errors are storage faults, in words an operator can act on (`faults.py` for SQLite;
  SQLSTATE classes for PostgreSQL). A PostgreSQL fault is raised as `PgStorageError` and a
  constraint as `PgIntegrityError`, subclasses of the `sqlite3` DB-API classes the store and
  its callers already catch, so every `except sqlite3.IntegrityError` and `sqlite3.Error`
  holds on both.
"""

from __future__ import annotations

import functools
import re
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from .faults import (
    SQLITE_CANTOPEN,
    SQLITE_FULL,
    SQLITE_IOERR,
    SQLITE_PERM,
    SQLITE_READONLY,
    storage_problem,
)

Row = dict[str, Any]

SCHEMES = ("postgresql://", "postgres://")

WRITE_LOCK = 0x41535452_0001
"""The advisory lock every write transaction takes on PostgreSQL (transaction-scoped): the
counterpart of SQLite's write lock taken by `BEGIN IMMEDIATE`."""

COORDINATOR_LOCK = 0x41535452_0002
"""The session advisory lock the leader holds on its lease connection (`leader.py`): the
server frees it the moment that session ends (the process killed, its host gone), so a standby
that can take it knows at once that the leader is gone, without waiting for its lease."""

CONNECT_TIMEOUT_SECONDS = 5
"""How long a connection attempt to the server may take before it counts as unreachable."""

SESSION_DEFAULTS = {
    "connect_timeout": str(CONNECT_TIMEOUT_SECONDS),
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
    "tcp_user_timeout": "30000",
}
"""libpq settings every session gets where the URL gives none of its own: a host that vanishes
(power, network) instead of refusing, as before a failover, is given up in about 30 s
(keepalives for an idle session, `tcp_user_timeout` for one waiting on its statement) instead
of the kernel's 15 minutes, and one that does not answer a new connection in 5 s is passed over
for the next host of the URL."""


class Cursor(Protocol):
    """What the store reads back from a statement, on either engine."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    """The write connection as the store's writes use it: `sqlite3.Connection`, or
    `PgConnection` over psycopg."""

    def execute(self, sql: str, parameters: Any = (), /) -> Cursor: ...

    def executemany(self, sql: str, seq_of_parameters: Any, /) -> Cursor: ...

    @property
    def in_transaction(self) -> bool: ...

    def close(self) -> None: ...


def is_postgresql(location: str | Path) -> bool:
    return isinstance(location, str) and location.startswith(SCHEMES)


def shown(location: str | Path) -> str:
    """The location as logs and messages name it: a URL without its password, whether in its
    user part or a `password=` query parameter. Read by hand, not by `urlsplit`: a libpq URL
    may list several hosts (`h1:5432,h2:5432`), which is no URL's host part."""
    if not is_postgresql(location):
        return str(location)
    text = str(location)
    scheme, _, rest = text.partition("://")
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    netloc, tail = rest[:cut], rest[cut:]
    userinfo, at, hosts = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = f"{userinfo.partition(':')[0]}:***@{hosts}"
    path, question, query = tail.partition("?")
    if question:
        query = "&".join(
            "password=***" if part.partition("=")[0] == "password" else part
            for part in query.split("&")
        )
    return f"{scheme}://{netloc}{path}{question}{query}"


# -- PostgreSQL errors ------------------------------------------------------------------------


class PgStorageError(sqlite3.OperationalError):
    """PostgreSQL could not take or serve a statement because of the server or its storage
    (unreachable, read-only, disk full): a storage fault, as SQLite's are."""

    def __init__(self, problem: str, code: int, detail: str) -> None:
        super().__init__(f"{problem}: {detail}")
        self.problem = problem
        self.code = code
        self.detail = detail

    def __reduce__(self) -> tuple[type[PgStorageError], tuple[str, int, str]]:
        """Raised in the pass worker, it comes back to the service whole (pickled)."""
        return type(self), (self.problem, self.code, self.detail)


class PgIntegrityError(sqlite3.IntegrityError):
    """A constraint refused the statement (a held GPU, a name taken)."""


class Deposed(Exception):  # noqa: N818 - the state it reports, as kube-scheduler's words
    """A write of a coordinator that no longer leads: another took the lease (a higher
    epoch) since this one won it. Nothing of the transaction was written. Not a storage
    fault (the database is fine): the process steps down (`leader.step_down`)."""

    def __init__(self, mine: int, found: int | None) -> None:
        super().__init__(
            f"this coordinator led at epoch {mine}, the database is at epoch {found}"
            if found is not None
            else f"this coordinator led at epoch {mine}; the database has no leader now"
        )
        self.mine = mine
        self.found = found


_UNREACHABLE = "cannot reach the database server"

_BY_SQLSTATE: dict[str, tuple[str, int]] = {
    "25006": ("the database is read-only", SQLITE_READONLY),  # read_only_sql_transaction
    "53100": ("disk full", SQLITE_FULL),
    "58030": ("I/O error", SQLITE_IOERR),
    "42501": ("permission denied", SQLITE_PERM),
    "57P01": (_UNREACHABLE, SQLITE_CANTOPEN),  # admin_shutdown: the server is stopping
    "57P02": (_UNREACHABLE, SQLITE_CANTOPEN),  # crash_shutdown
    "57P03": (_UNREACHABLE, SQLITE_CANTOPEN),  # cannot_connect_now: starting or recovering
    "57P05": (_UNREACHABLE, SQLITE_CANTOPEN),  # idle_session_timeout
    # idle_in_transaction_session_timeout: the server ended a session whose transaction sat
    # idle (a leader paused mid-write, `leader.session_settings`); nothing of it was written.
    "25P03": (_UNREACHABLE, SQLITE_CANTOPEN),
    "08000": (_UNREACHABLE, SQLITE_CANTOPEN),
    "08003": (_UNREACHABLE, SQLITE_CANTOPEN),
    "08006": (_UNREACHABLE, SQLITE_CANTOPEN),
    "08001": (_UNREACHABLE, SQLITE_CANTOPEN),
    "08004": (_UNREACHABLE, SQLITE_CANTOPEN),
}
"""SQLSTATEs that are storage faults, as (words, the SQLite primary code of the same kind: the
fault handling in `db.py` reopens the connection after the same codes on both)."""


def _pg_problem(error: BaseException) -> tuple[str, int] | None:
    psycopg = _psycopg()
    if not isinstance(error, psycopg.Error):
        return None
    state = error.sqlstate
    if state is None:
        # No SQLSTATE: the client itself failed (refused, reset, timed out, closed).
        return (
            (_UNREACHABLE, SQLITE_CANTOPEN) if isinstance(error, psycopg.OperationalError) else None
        )
    found = _BY_SQLSTATE.get(state)
    if found is None and state.startswith("08"):
        found = (_UNREACHABLE, SQLITE_CANTOPEN)
    if found is None and state.startswith("53"):
        found = (f"the server is out of resources (SQLSTATE {state})", SQLITE_FULL)
    return found


def converted(error: Exception) -> Exception:
    """psycopg's error as the store raises it: a storage fault, a constraint, or as it is."""
    found = _pg_problem(error)
    if found is not None:
        return PgStorageError(found[0], found[1], str(error).strip())
    if isinstance(error, _psycopg().IntegrityError):
        return PgIntegrityError(str(error).strip())
    return error


def problem(error: BaseException) -> tuple[str, int] | None:
    """(words, code) when `error`, from either engine, is a storage fault; None otherwise."""
    if isinstance(error, PgStorageError):
        return error.problem, error.code
    if isinstance(error, sqlite3.Error):
        return storage_problem(error)
    return None


# -- PostgreSQL connections -------------------------------------------------------------------


@functools.cache
def _psycopg() -> Any:
    """psycopg 3, imported on first use: only a `postgresql://` database needs it."""
    try:
        import psycopg
    except ImportError as error:  # pragma: no cover - the message is the point
        raise PgStorageError(
            "the PostgreSQL driver is not installed",
            SQLITE_CANTOPEN,
            "install it with: pip install 'psycopg[binary]>=3.1' (or astraeus[postgresql])",
        ) from error
    return psycopg


def _register_adapters(conn: Any) -> None:
    """Types as the store expects them from SQLite: a Python bool is stored as 0/1 (the
    schema's flags are integers), and a NUMERIC (what `sum` of a BIGINT gives) reads back as
    an int or a float, never a Decimal."""
    psycopg = _psycopg()
    from psycopg.adapt import Dumper, Loader

    class BoolAsInt(Dumper):
        oid = psycopg.postgres.types["int8"].oid

        def dump(self, obj: bool) -> bytes:
            return b"1" if obj else b"0"

    class NumericAsNumber(Loader):
        def load(self, data: Any) -> int | float:
            text = bytes(data).decode()
            return float(text) if ("." in text or "e" in text or "N" in text) else int(text)

    conn.adapters.register_dumper(bool, BoolAsInt)
    conn.adapters.register_loader("numeric", NumericAsNumber)


def pg_connect(url: str, *, application: str = "astraeus-coordinator") -> Any:
    """A psycopg connection in autocommit mode (transactions are opened explicitly, as with
    SQLite's `isolation_level=None`), with `SESSION_DEFAULTS` where the URL says nothing; a
    failure to connect is a `PgStorageError`."""
    psycopg = _psycopg()
    from psycopg.conninfo import conninfo_to_dict

    try:
        given = conninfo_to_dict(url)
        defaults = {key: value for key, value in SESSION_DEFAULTS.items() if key not in given}
        conn = psycopg.connect(url, autocommit=True, application_name=application, **defaults)
    except psycopg.Error as error:
        raise converted(error) from error
    _register_adapters(conn)
    return conn


@functools.lru_cache(maxsize=1024)
def to_postgresql(sql: str) -> str:
    """The store's SQL for psycopg: `?` placeholders become `%s` and a literal `%` doubles,
    outside quoted text and identifiers alike (psycopg reads every `%` of a statement)."""
    out: list[str] = []
    quote: str | None = None
    for char in sql:
        if quote is not None:
            if char == quote:
                quote = None
            out.append("%%" if char == "%" else char)
            continue
        if char in "'\"":
            quote = char
            out.append(char)
        elif char == "?":
            out.append("%s")
        elif char == "%":
            out.append("%%")
        else:
            out.append(char)
    return "".join(out)


def _params(parameters: Any) -> Any:
    if isinstance(parameters, Mapping):
        raise TypeError("the store's SQL uses ? placeholders only")
    return tuple(parameters)


class PgCursor:
    """psycopg's cursor as `sqlite3.Cursor` reads: fetching after a statement that returns no
    rows gives None or [] instead of raising."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw

    @property
    def rowcount(self) -> int:
        return int(self._raw.rowcount)

    def fetchone(self) -> Any:
        if self._raw.description is None:
            return None
        try:
            return self._raw.fetchone()
        except _psycopg().Error as error:
            raise converted(error) from error

    def fetchall(self) -> list[Any]:
        if self._raw.description is None:
            return []
        try:
            return list(self._raw.fetchall())
        except _psycopg().Error as error:
            raise converted(error) from error


class PgConnection:
    """A psycopg connection speaking the store's SQL (`Connection`)."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def execute(self, sql: str, parameters: Any = (), /) -> PgCursor:
        """`sql` with `?` placeholders; without parameters it is sent as it is (several
        statements may then go in one round trip)."""
        try:
            if not parameters:
                return PgCursor(self.raw.execute(sql.encode()))
            return PgCursor(self.raw.execute(to_postgresql(sql), _params(parameters)))
        except _psycopg().Error as error:
            raise converted(error) from error

    def executemany(self, sql: str, seq_of_parameters: Any, /) -> PgCursor:
        rows = [_params(p) for p in seq_of_parameters]
        cursor = self.raw.cursor()
        try:
            if rows:
                cursor.executemany(to_postgresql(sql), rows)
        except _psycopg().Error as error:
            raise converted(error) from error
        return PgCursor(cursor)

    def dicts(self, sql: str, parameters: Any = ()) -> list[Row]:
        """Rows as dicts (the `Database.read` of a PostgreSQL database)."""
        from psycopg.rows import dict_row

        try:
            with self.raw.cursor(row_factory=dict_row) as cursor:
                cursor.execute(to_postgresql(sql), _params(parameters))
                return list(cursor.fetchall()) if cursor.description is not None else []
        except _psycopg().Error as error:
            raise converted(error) from error

    @property
    def in_transaction(self) -> bool:
        status = self.raw.info.transaction_status
        return bool(status != _psycopg().pq.TransactionStatus.IDLE)

    @property
    def closed(self) -> bool:
        return bool(self.raw.closed or self.raw.broken)

    def close(self) -> None:
        self.raw.close()


# -- The schema -------------------------------------------------------------------------------

_TYPES = (
    (
        re.compile(r"\bINTEGER PRIMARY KEY AUTOINCREMENT\b"),
        "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
    ),
    (re.compile(r"\bINTEGER PRIMARY KEY\b"), "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"),
    (re.compile(r"\bINTEGER\b"), "BIGINT"),
    (re.compile(r"\bREAL\b"), "DOUBLE PRECISION"),
    (re.compile(r"(?<![\"\w])offset(?![\"\w])"), '"offset"'),
)


def postgresql_ddl(script: str) -> str:
    """A migration's SQLite text with PostgreSQL's types (see the module's text)."""
    for pattern, replacement in _TYPES:
        script = pattern.sub(replacement, script)
    return script


def split_statements(script: str) -> list[str]:
    """A migration's statements, in order. SQLite's own tokenizer decides where one ends
    (`sqlite3.complete_statement`: a trigger's body holds semicolons), for both engines; a
    PostgreSQL function body is one dollar-quoted string, which it reads as such."""
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer) and buffer.count("$$") % 2 == 0:
            if _has_sql(buffer):
                statements.append(buffer.strip())
            buffer = ""
    if _has_sql(buffer):
        statements.append(buffer.strip())
    return statements


def _has_sql(text: str) -> bool:
    return any(line.strip() and not line.strip().startswith("--") for line in text.splitlines())


VERSION_TABLE = "CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)"


def pg_version(conn: PgConnection) -> int:
    """The number of migrations applied to a PostgreSQL database (0: a new one)."""
    found = conn.execute("SELECT to_regclass('schema_version') IS NOT NULL").fetchone()
    if not found[0]:
        return 0
    row = conn.execute("SELECT version FROM schema_version").fetchone()
    return int(row[0]) if row else 0


def pg_set_version(conn: PgConnection, number: int) -> None:
    conn.execute(VERSION_TABLE)
    conn.execute("DELETE FROM schema_version")
    conn.execute("INSERT INTO schema_version (version) VALUES (?)", (number,))


def pg_begin(conn: PgConnection, epoch: int | None = None) -> None:
    """A write transaction on PostgreSQL: `BEGIN`, then the writers' advisory lock (held to
    its commit or rollback), as `BEGIN IMMEDIATE` takes SQLite's. A leader's write (`epoch`
    given) then reads the leadership's epoch, in the same round trip: taking the lease takes
    the writers' lock too (`leader.py`), so the epoch read here cannot move before this
    transaction ends; one that moved already raises `Deposed`, with the transaction rolled
    back. Every write of a leader is fenced so, placements included."""
    if epoch is None:
        conn.execute(f"BEGIN; SELECT pg_advisory_xact_lock({WRITE_LOCK})")  # one round trip
        return
    try:
        cursor = conn.raw.execute(
            f"BEGIN; SELECT pg_advisory_xact_lock({WRITE_LOCK});"  # noqa: S608 - a constant
            " SELECT epoch FROM leadership WHERE id = 1".encode()
        )
        while cursor.nextset():  # the results of BEGIN, of the lock, then the epoch's
            pass
        row = cursor.fetchone()
    except _psycopg().Error as error:
        raise converted(error) from error
    found = int(row[0]) if row is not None else None
    if found != epoch:
        conn.execute("ROLLBACK")
        raise Deposed(epoch, found)


# -- Copying a SQLite database in (`transfer.py`) -------------------------------------------

_NAME = re.compile(r"[a-z_][a-z0-9_]*\Z")


def quoted(name: str) -> str:
    """A table's or column's name as PostgreSQL reads it whatever it is (`offset` is reserved);
    only the schema's own plain names are taken."""
    if not _NAME.match(name):
        raise ValueError(f"{name!r} is not a table or column name of the schema")
    return f'"{name}"'


def pg_tables(conn: PgConnection) -> dict[str, list[str]]:
    """The schema's tables and their columns (the version table left out)."""
    rows = conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND table_name <> 'schema_version'"
        " ORDER BY table_name, ordinal_position"
    ).fetchall()
    tables: dict[str, list[str]] = {}
    for table, column in rows:
        tables.setdefault(str(table), []).append(str(column))
    return tables


def pg_triggers(conn: PgConnection, table: str, *, enabled: bool) -> None:
    """Turn the table's own triggers off (or on again) in this transaction: rows copied in
    keep the values they had (a machine's change-feed `stamp`), foreign keys still checked."""
    state = "ENABLE" if enabled else "DISABLE"
    conn.execute(f"ALTER TABLE {quoted(table)} {state} TRIGGER USER")


def pg_copy(conn: PgConnection, table: str, columns: Sequence[str], rows: Any) -> None:
    """Rows (tuples in `columns`' order) into `table` by `COPY ... FROM STDIN`: one stream, not
    a round trip per row."""
    names = ", ".join(quoted(column) for column in columns)
    statement = f"COPY {quoted(table)} ({names}) FROM STDIN"
    try:
        with conn.raw.cursor() as cursor, cursor.copy(statement.encode()) as copy:
            for row in rows:
                copy.write_row(row)
    except _psycopg().Error as error:
        found = converted(error)
        if not isinstance(found, sqlite3.Error):  # a value the column refuses (a NUL in text)
            found = sqlite3.DataError(str(error).strip())
        raise found from error


def pg_identities(conn: PgConnection) -> list[tuple[str, str]]:
    """(table, column) of every identity column: the ids PostgreSQL hands out itself."""
    rows = conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND is_identity = 'YES'"
        " ORDER BY table_name"
    ).fetchall()
    return [(str(table), str(column)) for table, column in rows]


def pg_next_id_after(conn: PgConnection, table: str, column: str, floor: int) -> None:
    """The next id the identity column hands out is past every id in the table and past
    `floor` (ids SQLite's AUTOINCREMENT gave out already: a deleted row's id is never reused)."""
    conn.execute(
        f"SELECT setval(pg_get_serial_sequence(?, ?),"  # noqa: S608 - quoted() names only
        f" greatest(coalesce(max({quoted(column)}), 0), ?) + 1, false) FROM {quoted(table)}",
        (table, column, floor),
    )


# -- JSON in TEXT columns ---------------------------------------------------------------------


def json_text(postgresql: bool, column: str, path: str) -> str:
    """SQL for the scalar at `path` (dotted keys) of the JSON text in `column`, as text;
    NULL where missing or JSON null."""
    if postgresql:
        keys = ",".join(path.split("."))
        return f"({column}::jsonb #>> '{{{keys}}}')"
    return f"json_extract({column}, '$.{path}')"


def json_pick(postgresql: bool, column: str, keys: Sequence[str]) -> str:
    """SQL for a JSON object (text) of only `keys` of the JSON object in `column`."""
    if postgresql:
        parts = ", ".join(f"'{key}', {column}::json -> '{key}'" for key in keys)
        return f"json_build_object({parts})::text"
    parts = ", ".join(f"'{key}', json_extract({column}, '$.{key}')" for key in keys)
    return f"json_object({parts})"
