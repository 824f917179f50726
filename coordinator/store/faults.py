"""Storage faults: which SQLite errors mean the file cannot be written, in words an operator can
act on, and the state of the current fault.

A fault is not a bug: the disk filled up, the file turned read-only, the device failed. Writes
answer 503 while it lasts (`api/errors.py`), reads keep working, and the first write that
succeeds again ends it (a full disk's once its file system has room again).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import datetime

# SQLite's primary result codes (https://sqlite.org/rescode.html); an extended code keeps its
# primary code in the low byte.
SQLITE_PERM = 3
SQLITE_BUSY = 5
SQLITE_LOCKED = 6
SQLITE_READONLY = 8
SQLITE_IOERR = 10
SQLITE_CORRUPT = 11
SQLITE_FULL = 13
SQLITE_CANTOPEN = 14
SQLITE_NOTADB = 26

_WORDS = {
    SQLITE_FULL: "disk full",
    SQLITE_READONLY: "the file is read-only",
    SQLITE_PERM: "permission denied",
    SQLITE_CANTOPEN: "cannot open the file",
    SQLITE_BUSY: "locked by another process",
    SQLITE_LOCKED: "locked by another process",
}
_NAMED = {
    SQLITE_IOERR: "I/O error",
    SQLITE_CORRUPT: "the file is corrupt",
    SQLITE_NOTADB: "not a database",
}

REOPEN = frozenset({SQLITE_READONLY, SQLITE_PERM, SQLITE_CANTOPEN, SQLITE_IOERR})
"""Faults after which the write connection is opened again before the next try: a connection
opened while the file was read-only stays read-only after the file is writable again."""


class StorageError(Exception):
    """A write failed because of the storage, not the request; the text says what is wrong."""

    def __init__(self, problem: str, code: int) -> None:
        super().__init__(f"database is not writable: {problem}")
        self.problem = problem
        self.code = code

    def __reduce__(self) -> tuple[type[StorageError], tuple[str, int]]:
        """Raised in the pass worker, it comes back to the service whole (pickled)."""
        return type(self), (self.problem, self.code)


def storage_problem(error: sqlite3.Error) -> tuple[str, int] | None:
    """(words, primary code) when `error` is a storage fault; None for anything else (a bug,
    a constraint), which stays what it is."""
    code = getattr(error, "sqlite_errorcode", None)
    if not isinstance(code, int):
        return None
    primary = code & 0xFF
    if primary in _WORDS:
        return _WORDS[primary], primary
    if primary in _NAMED:
        name = getattr(error, "sqlite_errorname", "") or str(code)
        return f"{_NAMED[primary]} ({name})", primary
    return None


@dataclass(frozen=True)
class Fault:
    """The storage fault in effect: what, since when, and how many writes it has failed."""

    problem: str
    code: int
    since: datetime
    failures: int = 1

    @property
    def error(self) -> str:
        return f"database is not writable: {self.problem}"
