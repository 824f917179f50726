"""Storage: one SQLite file, its schema, and the coordinator's reads and writes of it."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from astraeus.shared.labels import POOL

from .agents import Agents
from .db import Database
from .machines import MachineRecord, Machines, network_site
from .reservations import Reservations, ReservationSpec, StoredReservation
from .runs import NameTakenError, Runs
from .tokens import Principal, Role, TokenInfo, Tokens
from .workspaces import Workspace, Workspaces, WorkspaceSpec


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
        self.machines.flush_seen()
        self.database.close()


__all__ = [
    "Database",
    "MachineRecord",
    "NameTakenError",
    "Principal",
    "ReservationSpec",
    "Role",
    "Store",
    "StoredReservation",
    "TokenInfo",
    "Workspace",
    "WorkspaceSpec",
    "network_site",
]
