"""The SQLite file: WAL mode, numbered migrations, one writer, each write in `BEGIN IMMEDIATE`."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlite_utils

from .migrations import MIGRATIONS

Row = dict[str, Any]


class Database:
    """Owns the one write connection and a read connection to the same file.

    The coordinator is one asyncio process: every write happens on the event loop's thread, one at
    a time, inside `write()`. Reads use their own connection, so they see committed data only.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        make_private(path)
        self._writer = self._connect(path)
        self._migrate()
        self._reader = self._connect(path)
        self.db = sqlite_utils.Database(self._reader)
        """sqlite-utils over the read connection, for queries."""

    @staticmethod
    def _connect(path: Path) -> sqlite3.Connection:
        # isolation_level=None: transactions are opened explicitly, never implicitly.
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        # NORMAL survives a killed process (not a power loss of the last commits) and is fast.
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=5000")
        return conn

    def _migrate(self) -> None:
        version = int(self._writer.execute("PRAGMA user_version").fetchone()[0])
        for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
            with self.write() as conn:
                for statement in _statements(script):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version={number}")

    @property
    def schema_version(self) -> int:
        return int(self._reader.execute("PRAGMA user_version").fetchone()[0])

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: committed on success, rolled back on any exception."""
        conn = self._writer
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def read(self, sql: str, params: tuple[object, ...] | dict[str, object] = ()) -> list[Row]:
        """Rows as dicts, through sqlite-utils on the read connection."""
        return list(self.db.query(sql, params))

    def read_one(self, sql: str, params: tuple[object, ...] | dict[str, object] = ()) -> Row | None:
        rows = self.read(sql, params)
        return rows[0] if rows else None

    def close(self) -> None:
        self._reader.close()
        self._writer.close()


def make_private(path: Path) -> None:
    """The database file, its WAL and shared memory readable by this user only, whatever the
    umask: they hold users' environment values and token hashes. SQLite gives the WAL and SHM
    files it creates the database file's mode; ones left from before are fixed here too."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.close(fd)
    for name in (path.name, f"{path.name}-wal", f"{path.name}-shm", f"{path.name}-journal"):
        part = path.with_name(name)
        if part.exists() and part.stat().st_mode & 0o077:
            os.chmod(part, 0o600)


def _statements(script: str) -> list[str]:
    """Split a migration into statements (executescript would commit on its own)."""
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements
