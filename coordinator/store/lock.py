"""One coordinator per SQLite database: an OS lock on the database file itself, held for the
process's life. (On PostgreSQL several coordinators share a database, one leading and the others
standing by: `leader.py`; `lease_session` names the leader's session for the standby's logs.)

`flock` on the file's own inode, whatever path leads to it: a symbolic link, a hard link, a bind
mount or a relative path all meet the same lock, so no second coordinator opens a second WAL
beside another name for the same database. The kernel releases the lock when the process ends in
any way, SIGKILL included, so a crashed coordinator never leaves a stale lock behind. SQLite's own
locks are POSIX record locks (`fcntl`), which on Linux never conflict with `flock` on a local file
system, so the pass worker and a backup read the file as before. (On NFS the kernel turns `flock`
into a record lock over the whole file, and SQLite is not safe there anyway: docs/operator.md.)

Who holds the lock is read from the kernel for the refusal message: `/proc/locks` names the pid
behind the lock on this inode, `/proc/<pid>/stat` when it started. No lock file is written.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import dialect


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


def lock_database(db: Path) -> DatabaseLock:
    """Take the database's lock, or raise `DatabaseInUseError` naming the holder. A database
    that does not exist yet is created empty (SQLite takes an empty file as a new database)."""
    # O_CLOEXEC: no child (the pass worker, a shell) inherits it and outlives us holding it.
    try:
        fd = os.open(db, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        # A read-only file or file system: a file opened to read still takes a flock.
        fd = os.open(db, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(os.fstat(fd))
        os.close(fd)
        raise DatabaseInUseError(
            f"{db} is in use by another coordinator ({holder}); one coordinator per database:"
            " stop that one first, or give this one another --db"
        ) from None
    return DatabaseLock(db, fd)


def _holder(stat: os.stat_result) -> str:
    """The process holding the flock on this inode, and since when, as the kernel says."""
    pid = lock_holder(stat)
    if pid is None:
        return "a process"
    since = started_at(pid)
    return f"pid {pid} on {socket.gethostname()}" + (f", since {since}" if since else "")


def started_at(pid: int, proc: Path = Path("/proc")) -> str | None:
    """When process `pid` started (UTC, to the second): its start in clock ticks after boot
    (`/proc/<pid>/stat`, field 22) plus the boot time (`btime` in `/proc/stat`)."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
        boot = next(
            int(line.split()[1])
            for line in (proc / "stat").read_text().splitlines()
            if line.startswith("btime ")
        )
    except (OSError, StopIteration, ValueError):
        return None
    # The command name (field 2) is in parentheses and may hold spaces: count after its end.
    fields = stat.rpartition(")")[2].split()
    ticks = int(fields[19])  # field 22 of the whole line
    at = datetime.fromtimestamp(boot + ticks / os.sysconf("SC_CLK_TCK"), UTC)
    return at.isoformat(timespec="seconds")


def lock_holder(stat: os.stat_result, locks: Path = Path("/proc/locks")) -> int | None:
    """The pid of the `flock` held on the file `stat` describes, from the kernel's lock table
    (`/proc/locks` lines such as `1: FLOCK  ADVISORY  WRITE 4242 08:02:131 0 EOF`: pid, then
    the device as hexadecimal major:minor and the inode); None where the table does not say."""
    wanted = (os.major(stat.st_dev), os.minor(stat.st_dev), stat.st_ino)
    try:
        lines = locks.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) < 6 or fields[1] != "FLOCK":
            continue  # a record lock, or a waiter ("1: -> FLOCK ...")
        pid, inode = fields[4], fields[5]
        major, _, rest = inode.partition(":")
        minor, _, number = rest.partition(":")
        with contextlib.suppress(ValueError):
            if (int(major, 16), int(minor, 16), int(number)) == wanted:
                return int(pid)
    return None


def lease_session(conn: Any) -> str | None:
    """The session holding the leader's `COORDINATOR_LOCK` on this PostgreSQL database, as an
    operator finds it: its `application_name` (the coordinator's host and pid), its client
    address and since when; None when no session holds it. `conn`: a psycopg connection."""
    holder = conn.execute(
        "SELECT a.application_name, a.client_addr::text, a.backend_start FROM pg_locks l"
        " JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory'"
        " AND l.granted AND l.classid = %s AND l.objid = %s AND l.objsubid = 1"
        " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        (dialect.COORDINATOR_LOCK >> 32, dialect.COORDINATOR_LOCK & 0xFFFFFFFF),
    ).fetchone()
    if holder is None:
        return None
    app, address, since = holder
    who = str(app or "a process") + (f" from {address}" if address else "")
    if since is not None:
        who += f", since {since.astimezone(UTC).isoformat(timespec='seconds')}"
    return who
