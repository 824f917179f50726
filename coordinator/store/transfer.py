"""Moving a stopped coordinator's SQLite file into an empty PostgreSQL database
(`astraeus-coordinator migrate --to`), checked before it is committed.

The file is only read: a copy that fails or does not check leaves it as it was, and the
coordinator can be started on it again. The target gets the schema through the normal store
(`Database`, the one migration list), then every table is copied in one PostgreSQL transaction,
parents before children, ids kept, with the target's own triggers off for the copy so each row
keeps its values (the machines' change-feed stamps). Each identity column then hands out ids
past the highest copied, and past every id SQLite's AUTOINCREMENT gave out (a revoked token's id
is never reused). Before the commit, each table's row count and a checksum of the holds (GPUs
and rendezvous ports) are compared on both sides; any difference rolls the whole copy back.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from . import dialect
from .db import Database
from .dialect import PgConnection
from .faults import StorageError
from .leader import Leadership, this_holder
from .lock import lock_database
from .migrations import MIGRATIONS
from .port_rows import HOLDING

BATCH = 5000
"""Rows read from the file at a time while a table is copied."""

HOLDS = {
    "gpu_holds": "SELECT machine, gpu_id, task_id FROM gpu_holds",
    "port holds": f"SELECT machine, port, id FROM tasks WHERE port IS NOT NULL AND {HOLDING}",  # noqa: S608
}
"""The holds checked row for row: the GPUs held (`gpu_holds`) and the rendezvous ports held
(`tasks.port` of the tasks that hold resources), as (machine, GPU or port, task id)."""


class TransferError(Exception):
    """The copy is refused or failed; nothing was committed to the target. The text says why."""


@dataclass(frozen=True)
class Table:
    """One table as copied: its name and its rows on each side."""

    name: str
    source_rows: int
    target_rows: int


@dataclass(frozen=True)
class Transfer:
    """What was copied and checked: per table, and each hold's checksum (equal on both sides)."""

    source: Path
    target: str
    version: int
    tables: tuple[Table, ...]
    checksums: dict[str, str]

    def lines(self) -> list[str]:
        """The summary the command prints."""
        width = max(len(table.name) for table in self.tables)
        out = [
            f"copied {self.source} (schema {self.version}) into {self.target}",
            f"{'table':<{width}}  {'sqlite':>10}  {'postgresql':>10}",
        ]
        out += [
            f"{t.name:<{width}}  {t.source_rows:>10,}  {t.target_rows:>10,}" for t in self.tables
        ]
        out += [f"{name} checksum sha256:{digest}" for name, digest in self.checksums.items()]
        rows = sum(table.source_rows for table in self.tables)
        out.append(
            f"checked: {len(self.tables)} tables, {rows:,} rows, row counts and hold checksums"
            " equal on both sides; committed"
        )
        out.append(f"next: start the coordinator with --database-url {self.target}")
        return out


def migrate(source: Path, target: str) -> Transfer:
    """Copy the stopped coordinator's file `source` into the empty PostgreSQL database `target`
    (a `postgresql://` URL), checked; raises `TransferError` (or `DatabaseInUseError`, naming
    the coordinator that holds either one) with nothing committed."""
    shown = dialect.shown(target)
    if not dialect.is_postgresql(target):
        raise TransferError(
            f"--to {shown!r} is not a postgresql:// URL, e.g."
            " postgresql://astraeus@db.example:5432/astraeus"
        )
    if not source.is_file():
        raise TransferError(f"{source}: no such SQLite file (give the coordinator's --db)")
    held = lock_database(source)
    try:
        with _read_only(source) as reader:
            version = _source_version(reader, source)
            leading = _lead_target(target)
            try:
                return _copy(reader, source, target, version, leading.epoch)
            finally:
                leading.resign()
                leading.close()
    finally:
        held.release()


@contextlib.contextmanager
def _read_only(source: Path) -> Iterator[sqlite3.Connection]:
    """One read transaction on the file: every table is read as of the same moment."""
    conn = sqlite3.connect(source, isolation_level=None)
    try:
        conn.execute("BEGIN")
        yield conn
    finally:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        conn.close()


def _source_version(reader: sqlite3.Connection, source: Path) -> int:
    """The file's schema version, which must be this version's: the copy reads the tables as
    this code writes them. An older file is refused, not migrated here, so that it stays
    exactly as the older coordinator left it if the move is abandoned."""
    try:
        version = int(reader.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.DatabaseError as error:
        raise TransferError(f"{source} is not a SQLite database: {error}") from error
    known = len(MIGRATIONS)
    if version == 0:
        raise TransferError(f"{source} holds no Astraeus database (schema version 0)")
    if version < known:
        raise TransferError(
            f"{source} is at schema version {version}, this astraeus at {known}: start this"
            " version's coordinator on it once (it brings the file up to date as it starts),"
            " stop it, then run migrate again"
        )
    if version > known:
        raise TransferError(
            f"{source} is at schema version {version}, newer than this astraeus knows"
            f" ({known}): run migrate with the version that wrote it"
        )
    return version


MIGRATE_LEASE_SECONDS = 3600.0
"""How long the copy's lease lasts: it ends (`resign`) when the copy does, and at once should
the process die (its lease session's lock frees), so it only bounds a copy left hanging."""


def _lead_target(target: str) -> Leadership:
    """The target's lease, held for the copy, as a leader holds it: a coordinator started on it
    meanwhile stands by until the copy ends (then leads the copied state); one that leads it
    already is refused, named. Every write of the copy is fenced by this lease's epoch."""
    leadership = Leadership(
        target,
        advertise=None,
        lease_seconds=MIGRATE_LEASE_SECONDS,
        holder=f"astraeus-coordinator migrate, {this_holder()}",
    )
    try:
        won = leadership.take()
    except Exception as error:
        leadership.close()
        raise TransferError(
            f"cannot open {dialect.shown(target)}: {_said(dialect.converted(error))}"
        ) from error
    if isinstance(won, int):
        return leadership
    leadership.close()
    who = "another process" if won is None else won.holder + (f", at {won.url}" if won.url else "")
    raise TransferError(
        f"refusing: {dialect.shown(target)} is in use by another coordinator ({who}); migrate"
        " only into an empty database no coordinator serves"
    )


def _copy(
    reader: sqlite3.Connection, source: Path, target: str, version: int, epoch: int | None
) -> Transfer:
    shown = dialect.shown(target)
    try:
        database = Database(target, epoch=epoch)  # an empty database's schema brought up
    except sqlite3.Error as error:
        raise TransferError(f"cannot open {shown}: {_said(error)}") from error
    try:
        with database.write() as conn:
            assert isinstance(conn, PgConnection)  # noqa: S101 - a postgresql:// Database
            return _copy_in(reader, conn, source, shown, version)
    except (sqlite3.Error, StorageError) as error:
        raise TransferError(
            f"the copy into {shown} failed, nothing was written: {_said(error)}"
        ) from error
    finally:
        database.close()


def _copy_in(
    reader: sqlite3.Connection, conn: PgConnection, source: Path, shown: str, version: int
) -> Transfer:
    """Inside the target's one write transaction: refuse a target with data, copy, check."""
    order = source_tables(reader)
    columns = _matching_columns(reader, conn, order, shown)
    _refuse_data(conn, order, shown)
    for name in order:
        dialect.pg_triggers(conn, name, enabled=False)
        try:
            dialect.pg_copy(conn, name, columns[name], _rows(reader, name, columns[name]))
        except sqlite3.Error as error:
            raise TransferError(
                f"copying table {name} failed, nothing was written to {shown}: {_said(error)}"
            ) from error
        dialect.pg_triggers(conn, name, enabled=True)
    floors = _given_ids(reader)
    for table, column in dialect.pg_identities(conn):
        dialect.pg_next_id_after(conn, table, column, floors.get(table, 0))
    tables, checksums = check(reader, conn, order)
    return Transfer(source, shown, version, tables, checksums)


def _said(error: BaseException) -> str:
    """The server's text on one line (libpq's spans several)."""
    return " ".join(str(error).split())


NOT_COPIED = frozenset({"leadership"})
"""The lease is the target's own (the copy holds it; a SQLite file never has a row there)."""


def source_tables(reader: sqlite3.Connection) -> list[str]:
    """The file's tables, each after every table its foreign keys name (in the order the
    schema made them otherwise); `NOT_COPIED` left out."""
    names = [
        str(row[0])
        for row in reader.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'"
            " AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
        )
        if str(row[0]) not in NOT_COPIED
    ]
    parents = {
        name: {
            str(row[2])
            for row in reader.execute(f"PRAGMA foreign_key_list({dialect.quoted(name)})")
            if str(row[2]) != name
        }
        for name in names
    }
    order: list[str] = []
    while len(order) < len(names):
        ready = [n for n in names if n not in order and parents[n] <= set(order)]
        if not ready:
            raise TransferError(f"the file's foreign keys form a cycle: {sorted(parents)}")
        order.append(ready[0])
    return order


def _matching_columns(
    reader: sqlite3.Connection, conn: PgConnection, order: list[str], shown: str
) -> dict[str, tuple[str, ...]]:
    """Each table's columns, which must be the same on both sides (the same schema version)."""
    target = {
        name: found for name, found in dialect.pg_tables(conn).items() if name not in NOT_COPIED
    }
    if set(target) != set(order):
        raise TransferError(
            f"{shown} has tables {sorted(target)}, the file {sorted(order)}: not the same schema"
        )
    columns = {}
    for name in order:
        found = tuple(
            str(row[1]) for row in reader.execute(f"PRAGMA table_info({dialect.quoted(name)})")
        )
        if set(found) != set(target[name]):
            raise TransferError(
                f"table {name}: the file has columns {sorted(found)}, {shown}"
                f" {sorted(target[name])}: not the same schema"
            )
        columns[name] = found
    return columns


def _refuse_data(conn: PgConnection, order: list[str], shown: str) -> None:
    """Only into an empty database: one that holds rows may be another cluster's. The first
    three tables with rows are named (parents first)."""
    full = [(name, rows) for name in order if (rows := _count(conn, name))]
    if full:
        named = [f"table {name}: {rows:,} row{'s' if rows != 1 else ''}" for name, rows in full]
        more = f", and {len(full) - 3} more tables" if len(full) > 3 else ""
        raise TransferError(
            f"refusing: {shown} already holds data ({', '.join(named[:3])}{more});"
            " migrate only into an empty database"
        )


def _rows(
    reader: sqlite3.Connection, table: str, columns: tuple[str, ...]
) -> Iterator[tuple[object, ...]]:
    names = ", ".join(dialect.quoted(column) for column in columns)
    cursor = reader.execute(f"SELECT {names} FROM {dialect.quoted(table)}")  # noqa: S608
    while batch := cursor.fetchmany(BATCH):
        yield from batch


def _given_ids(reader: sqlite3.Connection) -> dict[str, int]:
    """The highest id each AUTOINCREMENT table ever gave out, deleted rows' included."""
    found = reader.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_sequence'"
    ).fetchone()
    if found is None:
        return {}
    return {
        str(name): int(seq) for name, seq in reader.execute("SELECT name, seq FROM sqlite_sequence")
    }


def _count(conn: sqlite3.Connection | PgConnection, table: str) -> int:
    return int(conn.execute(f"SELECT count(*) FROM {dialect.quoted(table)}").fetchone()[0])  # noqa: S608


def holds_checksum(conn: sqlite3.Connection | PgConnection, sql: str) -> str:
    """sha256 over the rows, each as tab-separated text, sorted: the same text on both engines
    for the same rows."""
    lines = sorted("\t".join(str(value) for value in row) for row in conn.execute(sql).fetchall())
    return hashlib.sha256("".join(line + "\n" for line in lines).encode()).hexdigest()


def check(
    reader: sqlite3.Connection, conn: PgConnection, order: list[str]
) -> tuple[tuple[Table, ...], dict[str, str]]:
    """Raise `TransferError` naming the first table whose row count differs between the file
    and the target, or the hold whose checksum does; otherwise the tables' counts and the
    holds' checksums."""
    tables = tuple(Table(name, _count(reader, name), _count(conn, name)) for name in order)
    for table in tables:
        if table.source_rows != table.target_rows:
            raise TransferError(
                f"check failed, rolled back: table {table.name} has {table.source_rows:,} rows"
                f" in the file and {table.target_rows:,} in the target"
            )
    checksums = {}
    for name, sql in HOLDS.items():
        mine, theirs = holds_checksum(reader, sql), holds_checksum(conn, sql)
        if mine != theirs:
            raise TransferError(
                f"check failed, rolled back: the {name} differ (sha256 {mine} in the file,"
                f" {theirs} in the target)"
            )
        checksums[name] = mine
    return tables, checksums
