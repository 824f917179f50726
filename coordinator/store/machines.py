"""Machines: the latest report of each, kept parsed in memory; cordons, labels, reservations."""

from __future__ import annotations

import functools
import ipaddress
import json
import sqlite3
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from astraeus.shared import MachineReport, MachineState
from astraeus.shared.labels import SITE

from .db import Database, Row


@dataclass(frozen=True)
class MachineRecord:
    """One machine as stored: the parsed report and what admins set on it."""

    name: str
    report: MachineReport | None = None
    address: str | None = None
    last_seen: datetime | None = None
    acked_seq: int = -1
    cordon_reason: str | None = None
    admin_labels: dict[str, str] = field(default_factory=dict)
    fingerprint: str = ""
    """What in the report decides placement; a change of it triggers a scheduler pass."""

    @property
    def labels(self) -> dict[str, str]:
        """The agent's labels, with the ones admins set winning."""
        reported = self.report.labels if self.report else {}
        return {**reported, **self.admin_labels}

    def state(self, now: datetime, down_after: timedelta) -> MachineState:
        if self.report is None or self.last_seen is None or now - self.last_seen > down_after:
            return MachineState.DOWN
        return MachineState.UP

    @property
    def site(self) -> str | None:
        return self.labels.get(SITE) or network_site(self.address)


@functools.lru_cache(maxsize=65536)
def network_site(address: str | None) -> str | None:
    """The site of a machine without a site label: the /24 (IPv4) or /64 (IPv6) it connects from."""
    if not address:
        return None
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    prefix = 24 if ip.version == 4 else 64
    return str(ipaddress.ip_network(f"{ip}/{prefix}", strict=False))


def fingerprint(report: MachineReport) -> str:
    """Everything but timestamps and free counters: a change here may change where runs fit."""
    return report.model_dump_json(exclude={"reported_at", "free_cpu_cores", "free_memory_bytes"})


class Machines:
    """Reads come from memory; every change is written through to SQLite first."""

    def __init__(self, database: Database) -> None:
        self._database = database
        self._records: dict[str, MachineRecord] = {}
        for row in database.read("SELECT * FROM machines"):
            record = _record(row)
            self._records[record.name] = record

    def get(self, name: str) -> MachineRecord | None:
        return self._records.get(name)

    def all(self) -> list[MachineRecord]:
        return [self._records[name] for name in sorted(self._records)]

    def write_report(
        self,
        conn: sqlite3.Connection,
        report: MachineReport,
        report_json: str,
        address: str | None,
        now: datetime,
        acked_seq: int,
    ) -> tuple[MachineRecord, MachineRecord | None]:
        """Store a report inside the caller's transaction; returns the new and the old record.

        The caller commits, then calls `remember`, so memory never runs ahead of the file."""
        old = self._records.get(report.name)
        printed = fingerprint(report)
        if old is not None and old.report is not None and old.fingerprint == printed:
            # Nothing that matters changed: a heartbeat, not a new report worth writing.
            conn.execute(
                "UPDATE machines SET address = ?, last_seen = ?, acked_seq = ? WHERE name = ?",
                (address, now.isoformat(), acked_seq, report.name),
            )
            # Memory keeps the newest report (timestamps, free counters); the file keeps the
            # newest one that could change placement.
            updated = replace(
                old, report=report, address=address, last_seen=now, acked_seq=acked_seq
            )
            return updated, old
        conn.execute(
            "INSERT INTO machines (name, report, address, last_seen, acked_seq, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET report = excluded.report,"
            " address = excluded.address, last_seen = excluded.last_seen,"
            " acked_seq = excluded.acked_seq",
            (report.name, report_json, address, now.isoformat(), acked_seq, now.isoformat()),
        )
        base = old or MachineRecord(report.name)
        new = replace(
            base,
            report=report,
            address=address,
            last_seen=now,
            acked_seq=acked_seq,
            fingerprint=printed,
        )
        return new, old

    def remember(self, record: MachineRecord) -> None:
        self._records[record.name] = record

    def cordon(self, name: str, reason: str | None) -> MachineRecord | None:
        """Cordon with a reason (None uncordons)."""
        return self._update(name, "cordon_reason", reason, cordon_reason=reason)

    def set_labels(self, name: str, labels: dict[str, str]) -> MachineRecord | None:
        return self._update(name, "labels", json.dumps(labels), admin_labels=dict(labels))

    def _update(
        self, name: str, column: str, value: object, **changes: object
    ) -> MachineRecord | None:
        record = self._records.get(name)
        if record is None:
            return None
        with self._database.write() as conn:
            conn.execute(f"UPDATE machines SET {column} = ? WHERE name = ?", (value, name))  # noqa: S608 - column is ours
        updated = replace(record, **changes)  # type: ignore[arg-type]
        self._records[name] = updated
        return updated

    def ensure(self, name: str, now: datetime) -> MachineRecord:
        """A machine known by name before it reports (its agent token was just made)."""
        record = self._records.get(name)
        if record is not None:
            return record
        with self._database.write() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO machines (name, created_at) VALUES (?, ?)",
                (name, now.isoformat()),
            )
        record = MachineRecord(name)
        self._records[name] = record
        return record


def _record(row: Row) -> MachineRecord:
    report = MachineReport.model_validate_json(row["report"]) if row["report"] else None
    return MachineRecord(
        name=row["name"],
        report=report,
        address=row["address"],
        last_seen=datetime.fromisoformat(row["last_seen"]) if row["last_seen"] else None,
        acked_seq=row["acked_seq"],
        cordon_reason=row["cordon_reason"],
        admin_labels=json.loads(row["labels"]),
        fingerprint=fingerprint(report) if report else "",
    )
