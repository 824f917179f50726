"""`astraeus-coordinator backup PATH`: a consistent copy of the database while it serves.

SQLite's online backup API copies every page inside one read transaction of the source, so the
copy is the database as one commit left it, while the coordinator goes on writing (WAL readers
never block the writer). The copy is written beside PATH under a temporary name, checked, and
renamed over PATH: a failed or interrupted backup never leaves half a file at PATH.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path


class BackupError(Exception):
    """The backup could not be made; the text says why."""


@dataclass(frozen=True)
class BackupSummary:
    runs: int
    machines: int
    schema_version: int
    size_bytes: int

    def line(self, source: Path, target: Path) -> str:
        return (
            f"backup of {source} written to {target}: {self.runs} runs, {self.machines}"
            f" machines, schema {self.schema_version}, {self.size_bytes} bytes, integrity ok"
        )


def backup(source: Path, target: Path) -> BackupSummary:
    """Copy `source` to `target` (replacing it), through the online backup API."""
    if not source.is_file():
        raise BackupError(f"no database at {source}")
    if target.exists() and target.resolve() == source.resolve():
        raise BackupError(f"{target} is the database itself: give another path")
    if not target.parent.is_dir():
        raise BackupError(f"no directory {target.parent}")
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    beside = [source.with_name(source.name + suffix) for suffix in ("-wal", "-shm")]
    missing = [path for path in beside if not path.exists()]
    try:
        _copy(source, partial)
        summary = _check(partial)
        _sync(partial)
        os.replace(partial, target)
        _sync(target.parent)
    except (sqlite3.Error, OSError) as error:
        raise BackupError(f"backup of {source} to {target} failed: {error}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
        _same_owner(source, missing)
    return summary


def _same_owner(source: Path, created: list[Path]) -> None:
    """SQLite creates the -wal and -shm of a WAL database even for a reader, when the
    coordinator is not running. Made by root (the usual backup user), they would keep the
    service's own user out of its database: they get the database file's owner."""
    info = source.stat()
    for path in created:
        with contextlib.suppress(OSError):
            if path.stat().st_uid != info.st_uid or path.stat().st_gid != info.st_gid:
                os.chown(path, info.st_uid, info.st_gid)


def _copy(source: Path, partial: Path) -> None:
    # Owner-only: the file holds token hashes and the environments users gave their runs.
    os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    # Read-only: the backup never writes the live file (nor runs its migrations).
    live = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    copy = sqlite3.connect(partial)
    try:
        live.execute("PRAGMA busy_timeout=5000")
        live.backup(copy)  # all pages in one step: one read transaction, one consistent state
        # One self-contained file (no -wal beside it); the coordinator turns WAL on again.
        copy.execute("PRAGMA journal_mode=DELETE")
    finally:
        copy.close()
        live.close()


def _check(path: Path) -> BackupSummary:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        verdict = conn.execute("PRAGMA integrity_check").fetchone()[0]
        if verdict != "ok":
            raise BackupError(f"the copy failed its integrity check: {verdict}")
        runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
        machines = conn.execute("SELECT count(*) FROM machines").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()
    return BackupSummary(int(runs), int(machines), int(version), path.stat().st_size)


def _sync(path: Path) -> None:
    """Make `path` (a file, or a directory's entries) durable before it is trusted."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
