"""Machines' rows: the latest report of each, its address and last report, cordons, labels.

The rows only: the records the coordinator keeps in memory, built from these reads, are
`coordinator/machine_records.py`'s."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from .db import Database
from .dialect import Connection

COLUMNS = (
    "name",
    "address",
    "last_seen",
    "acked_seq",
    "cordon_reason",
    "labels",
    "report_version",
)
"""The columns read of every machine (the report only when its version changed)."""

MachineRow = tuple[Any, ...]
"""A machine's `COLUMNS`, in that order."""


class Machines:
    """Reads and writes of the `machines` table."""

    def __init__(self, database: Database) -> None:
        self._database = database

    def since(self, stamp: int) -> list[tuple[Any, ...]]:
        """The `COLUMNS` and `stamp` of machines stamped after `stamp` (every machine for -1):
        a trigger moves a machine's `stamp` past every other on each insert and update
        (migration 9), so an idle cluster costs one indexed query."""
        columns = ", ".join(COLUMNS)
        return self._database.tuples(
            f"SELECT {columns}, stamp FROM machines WHERE stamp > ?",  # noqa: S608
            (stamp,),
        )

    def every(self) -> list[tuple[Any, ...]]:
        """The `COLUMNS` and `stamp` of every machine."""
        columns = ", ".join(COLUMNS)
        return self._database.tuples(f"SELECT {columns}, stamp FROM machines")  # noqa: S608

    def count(self) -> int:
        return int(self._database.tuples("SELECT count(*) FROM machines")[0][0])

    def reports(
        self, names: list[str], compact_prefix: str | None = None
    ) -> dict[str, tuple[str | None, str | None]]:
        """The stored report of each of `names`: its JSON and its compact form (migration 17;
        None for a report stored before it). `compact_prefix`: the JSON is left out (None) of
        each row whose compact form starts with it, a form the caller reads without the JSON
        (a start then reads ~1.5 KB less a machine: 75 MB at 50,000 machines)."""
        found: dict[str, tuple[str | None, str | None]] = {}
        column = "report"
        first: tuple[object, ...] = ()
        if compact_prefix is not None:
            length = len(compact_prefix)
            column = f"CASE WHEN substr(compact, 1, {length}) = ? THEN NULL ELSE report END"
            first = (compact_prefix,)
        for start in range(0, len(names), 500):  # within SQLite's limit on parameters
            chunk = names[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for name, report, compact in self._database.tuples(
                f"SELECT name, {column}, compact FROM machines WHERE name IN ({marks})",  # noqa: S608
                (*first, *chunk),
            ):
                found[str(name)] = (report, compact)
        return found

    def write_seen(self, seen: dict[str, tuple[str | None, datetime]]) -> None:
        """Each machine's address and last report time, in one transaction."""
        with self._database.write() as conn:
            conn.executemany(
                "UPDATE machines SET address = ?, last_seen = ? WHERE name = ?",
                [(address, at.isoformat(), name) for name, (address, at) in seen.items()],
            )

    @staticmethod
    def write_beat(
        conn: Connection, name: str, address: str | None, now: datetime, acked_seq: int
    ) -> None:
        """A report with nothing new for placement, inside the caller's transaction: its
        address, time and the agent's acknowledged update; the stored report stays."""
        conn.execute(
            "UPDATE machines SET address = ?, last_seen = ?, acked_seq = ? WHERE name = ?",
            (address, now.isoformat(), acked_seq, name),
        )

    @staticmethod
    def write_report(
        conn: Connection,
        name: str,
        report_json: str,
        compact: str,
        address: str | None,
        now: datetime,
        acked_seq: int,
    ) -> None:
        """A new report, as JSON and in its compact form, inside the caller's transaction (the
        machine's row made if new)."""
        conn.execute(
            "INSERT INTO machines"
            " (name, report, compact, address, last_seen, acked_seq, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET"
            " report = excluded.report, compact = excluded.compact,"
            " address = excluded.address, last_seen = excluded.last_seen,"
            " acked_seq = excluded.acked_seq, report_version = machines.report_version + 1",
            (name, report_json, compact, address, now.isoformat(), acked_seq, now.isoformat()),
        )

    def cordon(self, name: str, reason: str | None) -> None:
        """Cordon with a reason (None uncordons)."""
        with self._database.write() as conn:
            conn.execute("UPDATE machines SET cordon_reason = ? WHERE name = ?", (reason, name))

    def set_labels(self, name: str, labels: dict[str, str]) -> None:
        with self._database.write() as conn:
            conn.execute(
                "UPDATE machines SET labels = ? WHERE name = ?", (json.dumps(labels), name)
            )

    @staticmethod
    def remove(conn: Connection, name: str) -> int:
        """The machine's row and its reservations, deleted inside the caller's transaction;
        returns how many reservations went with it."""
        reservations = conn.execute("DELETE FROM reservations WHERE machine = ?", (name,))
        conn.execute("DELETE FROM machines WHERE name = ?", (name,))
        return reservations.rowcount

    def ensure(self, name: str, now: datetime) -> None:
        """A machine known by name before it reports (its agent token was just made)."""
        with self._database.write() as conn:
            conn.execute(
                "INSERT INTO machines (name, created_at) VALUES (?, ?) ON CONFLICT DO NOTHING",
                (name, now.isoformat()),
            )
