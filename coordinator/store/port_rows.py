"""Rendezvous ports held by tasks (`tasks.port`): who needs one, which are held, writing what the
scheduler gave, and taking back one an agent found busy. The store never chooses a port: the
scheduler does (`scheduler/port_grants.py`).

A port is held while its task holds resources (Assigned, Starting, Running, or Lost and still
`held`): migration 7's unique index `tasks_port` on (machine, port) over exactly those tasks is
the invariant, as `gpu_holds`' key is for GPUs.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .db import Database

HOLDING = "(state IN ('Assigned', 'Starting', 'Running') OR held = 1)"


@dataclass(frozen=True)
class PortNeed:
    """Worker 0 of a run of several workers, placed without a port yet. A world of one (a
    one-worker run, an array element) needs none."""

    id: int
    task: str
    machine: str


def needing_ports(database: Database) -> list[PortNeed]:
    array = database.json_text("runs.spec", "requested_resources.array")
    rows = database.read(
        "SELECT tasks.id, tasks.name, tasks.machine FROM tasks"  # noqa: S608 - our own text
        " JOIN runs ON runs.seq = tasks.run_seq"
        " WHERE tasks.state = 'Assigned' AND tasks.port IS NULL AND tasks.machine IS NOT NULL"
        " AND tasks.idx = 0"
        f" AND {array} IS NULL"
        " AND EXISTS (SELECT 1 FROM tasks AS other"
        " WHERE other.run_seq = tasks.run_seq AND other.idx > 0)"
        " ORDER BY tasks.id"
    )
    return [PortNeed(row["id"], row["name"], row["machine"]) for row in rows]


def held_ports(database: Database, machines: Iterable[str]) -> dict[str, set[int]]:
    """The ports tasks hold on each of `machines`."""
    names = sorted(set(machines))
    held: dict[str, set[int]] = {name: set() for name in names}
    for start in range(0, len(names), 500):  # within SQLite's limit on parameters
        chunk = names[start : start + 500]
        marks = ",".join("?" * len(chunk))
        for row in database.read(
            f"SELECT machine, port FROM tasks WHERE port IS NOT NULL AND {HOLDING}"  # noqa: S608
            f" AND machine IN ({marks})",
            tuple(chunk),
        ):
            held[row["machine"]].add(row["port"])
    return held


def set_ports(database: Database, given: Sequence[tuple[int, int]]) -> int:
    """Write (task id, port) pairs for tasks still Assigned without one; a port held meanwhile
    (the unique index refuses it) is skipped, and the next pass chooses again. Returns how
    many were written."""
    written = 0
    if not given:
        return 0
    with database.write() as conn:
        for task_id, port in given:
            try:
                cursor = conn.execute(
                    "UPDATE tasks SET port = ? WHERE id = ? AND state = 'Assigned'"
                    " AND port IS NULL",
                    (port, task_id),
                )
            except sqlite3.IntegrityError:
                continue
            written += cursor.rowcount
    return written


def refuse_ports(database: Database, machine: str, busy: Sequence[tuple[str, int]]) -> list[int]:
    """The agent of `machine` found each (task uid, port) busy: each such task gives its port
    back if it is still Assigned there with that port (an agent speaks for its own tasks only).
    Returns the ports given back."""
    given_back = []
    with database.write() as conn:
        for uid, port in busy:
            cursor = conn.execute(
                "UPDATE tasks SET port = NULL WHERE uid = ? AND machine = ? AND port = ?"
                " AND state = 'Assigned'",
                (uid, machine, port),
            )
            if cursor.rowcount:
                given_back.append(port)
    return given_back
