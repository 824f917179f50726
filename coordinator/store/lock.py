"""One coordinator per database: an OS lock on a file beside it, held for the process's life.

`flock` on `<db>.lock`: the kernel releases it when the process ends in any way, SIGKILL
included, so a crashed coordinator never leaves a stale lock behind. The file says who holds it
(pid, host, start time), for the refusal message; its content is never trusted for the lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
from datetime import UTC, datetime
from pathlib import Path


class DatabaseInUseError(Exception):
    """Another process holds the database's lock; the text names it."""


class DatabaseLock:
    """The held lock; `release` (or the process's end) lets another coordinator start."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor releases the flock
            self._fd = None


def lock_path(db: Path) -> Path:
    return db.with_name(db.name + ".lock")


def lock_database(db: Path) -> DatabaseLock:
    """Take the database's lock, or raise `DatabaseInUseError` naming the holder."""
    path = lock_path(db)
    # O_CLOEXEC: no child (the pass worker, a shell) inherits it and outlives us holding it.
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        # A read-only directory or file: an existing lock file still locks when opened to read.
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 512, 0).decode(errors="replace").strip() or "a process"
        os.close(fd)
        raise DatabaseInUseError(
            f"{db} is in use by another coordinator ({holder}); one coordinator per database:"
            " stop that one first, or give this one another --db"
        ) from None
    with contextlib.suppress(OSError):  # who holds it is only for the message
        os.ftruncate(fd, 0)
        started = datetime.now(UTC).isoformat(timespec="seconds")
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}, since {started}\n".encode(), 0)
    return DatabaseLock(path, fd)
