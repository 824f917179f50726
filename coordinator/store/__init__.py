"""Storage: one SQLite file, its schema, and the coordinator's reads and writes of it."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from astraeus.shared.labels import POOL

from .agents import Agents
from .db import Database
from .faults import StorageError
from .machines import MachineRecord, Machines, network_site
from .reservations import Reservations
from .runs import NameTakenError, Runs
from .tokens import Principal, Role, TokenInfo, Tokens
from .workspaces import Workspaces

log = logging.getLogger(__name__)


class Store:
    """Every table's operations over one database."""

    def __init__(
        self,
        database: Database,
        *,
        log_cap_bytes: int = 1024 * 1024,
        access_labels: Iterable[str] = (POOL,),
    ) -> None:
        self.database = database
        self.tokens = Tokens(database)
        self.workspaces = Workspaces(database)
        self.machines = Machines(database, access_labels)
        self.reservations = Reservations(database)
        self.runs = Runs(database)
        self.agents = Agents(database, self.machines, log_cap_bytes)

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        log_cap_bytes: int = 1024 * 1024,
        access_labels: Iterable[str] = (POOL,),
    ) -> Store:
        return cls(Database(path), log_cap_bytes=log_cap_bytes, access_labels=access_labels)

    def close(self) -> None:
        """Write the heartbeats kept in memory, then close the file. During a storage fault
        they are dropped (logged): the next start counts silence from its own start anyway."""
        try:
            self.machines.flush_seen()
        except StorageError as error:
            log.warning("heartbeats since the last pass not saved: %s", error)
        self.database.close()


__all__ = [
    "Database",
    "MachineRecord",
    "NameTakenError",
    "Principal",
    "Role",
    "StorageError",
    "Store",
    "TokenInfo",
    "network_site",
]
