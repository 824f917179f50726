"""Opening the database for `serve`: its lock (a SQLite file's; on PostgreSQL the leader's lease
stands in for it, `store/leader.py`), the file (or the PostgreSQL database), the first admin
token, a first write."""

from __future__ import annotations

import gc
import logging
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from astraeus.coordinator.machine_records import MachineRecords
from astraeus.coordinator.scheduler.gc_policy import give_back_freed
from astraeus.coordinator.settings import Settings
from astraeus.coordinator.store import Role, StorageError, Store
from astraeus.coordinator.store.dialect import shown
from astraeus.coordinator.store.leader import Leadership
from astraeus.coordinator.store.lock import DatabaseInUseError, DatabaseLock, lock_database
from astraeus.shared.clock import SystemClock

log = logging.getLogger("astraeus.coordinator")

ADMIN_TOKEN_FILE = "admin.token"  # noqa: S105 - a file name


def private_dir(path: Path) -> None:
    """Create a directory only its owner may enter (as systemd's StateDirectoryMode=0700),
    whatever the umask. One that exists is left as it is (it may be shared, as /tmp is), with a
    warning when others may enter it: the files the coordinator writes there are 0600 anyway."""
    if not path.exists():
        path.mkdir(mode=0o700, parents=True)
        os.chmod(path, 0o700)  # mkdir's mode passes through the umask
        return
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        log.warning(
            "%s is mode %o: other users may list it (the coordinator's files in it are 0600);"
            " make it 0700 or give the coordinator a directory of its own",
            path,
            mode,
        )


def open_store(settings: Settings, leadership: Leadership | None = None) -> Store:
    """The store; a PostgreSQL leader's (`leadership` won) with its writes fenced by its
    epoch and its sessions' idle transactions cut after about a lease."""
    if not settings.database_url:
        private_dir(settings.db.parent)
    if leadership is None:
        return Store.open(settings.database, log_cap_bytes=settings.log_cap_bytes)
    return Store.open(
        settings.database,
        log_cap_bytes=settings.log_cap_bytes,
        epoch=leadership.epoch,
        lease_seconds=leadership.lease_seconds,
    )


def lock(settings: Settings) -> DatabaseLock | None:
    """The SQLite file's one-coordinator lock; None on PostgreSQL, where the leader's lease
    (taken before `start`) decides who serves."""
    if settings.database_url:
        return None
    private_dir(settings.db.parent)
    return lock_database(settings.db)


def first_admin_token(store: Store, state_dir: Path) -> Path | None:
    """On an empty database, create an admin token and write it to a 0600 file."""
    if store.tokens.count():
        return None
    secret, _ = store.tokens.create(Role.ADMIN, SystemClock().now(), description="first admin")
    private_dir(state_dir)
    path = state_dir / ADMIN_TOKEN_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secret + "\n")
    os.chmod(path, 0o600)  # an existing file keeps its mode through O_CREAT
    return path


def start(
    settings: Settings,
    leadership: Leadership | None = None,
    opened: Callable[[Store], None] | None = None,
) -> tuple[DatabaseLock | None, Store, MachineRecords] | str:
    """The database's lock, the open store and the machines read from it, or why the
    coordinator cannot start. On PostgreSQL, `leadership` has won the lease; a write the
    fence refuses on the way raises `Deposed`. `opened` is called with the store once it is
    open and migrated, before the machines are read (the service has its pass worker start
    reading them then, beside it)."""
    shown = shown_database(settings)
    try:
        held = lock(settings)
    except DatabaseInUseError as exc:
        return str(exc)
    except (OSError, sqlite3.Error) as exc:
        return f"cannot lock {shown}: {exc}"
    try:
        store = open_store(settings, leadership)
        if opened is not None:
            opened(store)
        records = MachineRecords(store, settings.access_labels)
    except (StorageError, sqlite3.Error, OSError) as exc:
        if held is not None:
            held.release()
        return f"cannot open {shown}: {exc}"
    try:
        token_file = first_admin_token(store, settings.state_dir)
    except (StorageError, sqlite3.Error, OSError) as exc:
        store.close()
        if held is not None:
            held.release()
        return f"cannot write the first admin token: {exc}"
    if token_file is not None:
        log.warning("first start: wrote an admin token to %s (mode 0600)", token_file)
    fault = store.database.probe()
    if fault is not None:
        log.error("%s; serving reads, writes answer 503 until it clears", fault.error)
    settle_loaded()
    return held, store, records


def shown_database(settings: Settings) -> str:
    """The database as messages name it (a URL without its password)."""
    return shown(settings.database)


def settle_loaded() -> None:
    """Move what was just loaded (every machine's parsed report: millions of objects at
    5,000 machines) out of the garbage collector's sight before the first request. Otherwise
    each full collection until the first pass ends (when the scheduler freezes what lives on)
    walks all of it, 100-450 ms a time, and agents' first reports wait behind them."""
    gc.collect()
    gc.freeze()
    give_back_freed()
