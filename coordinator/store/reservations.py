"""Reservations: a machine held for runs selecting some labels, or for a workspace for a while."""

from __future__ import annotations

import json
from datetime import datetime

from astraeus.shared.machines import ReservationSpec, StoredReservation

from .db import Database, Row


class Reservations:
    def __init__(self, database: Database) -> None:
        self._database = database

    def add(self, machine: str, spec: ReservationSpec) -> StoredReservation:
        with self._database.write() as conn:
            cursor = conn.execute(
                "INSERT INTO reservations (machine, labels, workspace, starts_at, ends_at)"
                " VALUES (?, ?, ?, ?, ?) RETURNING id",
                (
                    machine,
                    json.dumps(spec.labels),
                    spec.workspace,
                    spec.starts_at.isoformat() if spec.starts_at else None,
                    spec.ends_at.isoformat() if spec.ends_at else None,
                ),
            )
            row_id = int(cursor.fetchone()[0])
        return StoredReservation(id=row_id, machine=machine, **spec.model_dump())

    def of(self, machine: str | None = None) -> list[StoredReservation]:
        if machine is None:
            rows = self._database.read("SELECT * FROM reservations ORDER BY id")
        else:
            rows = self._database.read(
                "SELECT * FROM reservations WHERE machine = ? ORDER BY id", (machine,)
            )
        return [_stored(row) for row in rows]

    def remove(self, machine: str, reservation_id: int) -> bool:
        with self._database.write() as conn:
            cursor = conn.execute(
                "DELETE FROM reservations WHERE machine = ? AND id = ?", (machine, reservation_id)
            )
        return cursor.rowcount > 0

    def expire(self, now: datetime) -> None:
        """Drop reservations that have ended (no write when none has)."""
        ended = self._database.read_one(
            "SELECT 1 AS one FROM reservations WHERE ends_at IS NOT NULL AND ends_at <= ? LIMIT 1",
            (now.isoformat(),),
        )
        if ended is None:
            return
        with self._database.write() as conn:
            conn.execute(
                "DELETE FROM reservations WHERE ends_at IS NOT NULL AND ends_at <= ?",
                (now.isoformat(),),
            )


def _stored(row: Row) -> StoredReservation:
    return StoredReservation(
        id=row["id"],
        machine=row["machine"],
        labels=json.loads(row["labels"]),
        workspace=row["workspace"],
        starts_at=row["starts_at"],
        ends_at=row["ends_at"],
    )
