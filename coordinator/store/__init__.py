"""Storage: one database (a SQLite file, or PostgreSQL), its schema, and the coordinator's reads
and writes of it."""

from __future__ import annotations

from pathlib import Path

from .agents import Agents
from .db import Database
from .dialect import Deposed
from .faults import StorageError
from .machines import Machines
from .reservations import Reservations
from .runs import NameTakenError, Runs
from .tokens import Principal, Role, TokenInfo, Tokens
from .workspaces import Workspaces


class Store:
    """Every table's operations over one database: rows written and read, nothing kept in
    memory (the machines' records are `coordinator/machine_records.py`'s)."""

    def __init__(self, database: Database, *, log_cap_bytes: int = 1024 * 1024) -> None:
        self.database = database
        self.tokens = Tokens(database)
        self.workspaces = Workspaces(database)
        self.machines = Machines(database)
        self.reservations = Reservations(database)
        self.runs = Runs(database)
        self.agents = Agents(database, log_cap_bytes)

    @classmethod
    def open(
        cls,
        location: Path | str,
        *,
        log_cap_bytes: int = 1024 * 1024,
        epoch: int | None = None,
        lease_seconds: float | None = None,
    ) -> Store:
        """The store over a SQLite file (a path) or a PostgreSQL database (a
        `postgresql://` URL); a PostgreSQL leader's writes fenced by its `epoch`."""
        database = Database(location, epoch=epoch, lease_seconds=lease_seconds)
        return cls(database, log_cap_bytes=log_cap_bytes)

    def close(self) -> None:
        self.database.close()


__all__ = [
    "Database",
    "Deposed",
    "NameTakenError",
    "Principal",
    "Role",
    "StorageError",
    "Store",
    "TokenInfo",
]
