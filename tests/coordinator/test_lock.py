"""The database lock's holder, read from the kernel's tables (`store/lock.py`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from astraeus.coordinator.store.lock import (
    DatabaseInUseError,
    lock_database,
    lock_holder,
    started_at,
)


def test_the_holder_is_the_flock_on_this_inode(tmp_path: Path) -> None:
    """Waiters (`->`), record locks and other inodes are not the holder; the device is read as
    hexadecimal major:minor."""
    db = tmp_path / "a.db"
    db.touch()
    stat = os.stat(db)
    device = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}"
    table = tmp_path / "locks"
    table.write_text(
        f"1: POSIX  ADVISORY  WRITE 11 {device}:{stat.st_ino} 0 EOF\n"
        f"2: FLOCK  ADVISORY  WRITE 22 {device}:{stat.st_ino + 1} 0 EOF\n"
        f"3: -> FLOCK  ADVISORY  WRITE 33 {device}:{stat.st_ino} 0 EOF\n"
        f"3: FLOCK  ADVISORY  WRITE 44 {device}:{stat.st_ino} 0 EOF\n"
    )
    assert lock_holder(stat, table) == 44
    table.write_text("")
    assert lock_holder(stat, table) is None
    assert lock_holder(stat, tmp_path / "missing") is None


def test_a_process_start_reads_as_utc(tmp_path: Path) -> None:
    """Field 22 of `/proc/<pid>/stat` after the command name, which may hold spaces and ')'."""
    (tmp_path / "7").mkdir()
    ticks = 250 * os.sysconf("SC_CLK_TCK")
    fields = ["S", *["0"] * 18, str(ticks), "0"]
    (tmp_path / "7" / "stat").write_text(f"7 (a ) b) {' '.join(fields)}\n")
    (tmp_path / "stat").write_text("cpu 1 2 3\nbtime 1764763200\n")
    assert started_at(7, tmp_path) == "2025-12-03T12:04:10+00:00"
    assert started_at(8, tmp_path) is None
    assert started_at(os.getpid()) is not None


def test_this_process_is_named_as_the_holder(tmp_path: Path) -> None:
    """A second take in the same process is a second open file: refused, naming this pid."""
    db = tmp_path / "a.db"
    held = lock_database(db)
    try:
        with pytest.raises(DatabaseInUseError, match=rf"\(pid {os.getpid()} on "):
            lock_database(tmp_path / "." / "a.db")
    finally:
        held.release()
    lock_database(db).release()
