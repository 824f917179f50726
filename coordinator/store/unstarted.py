"""Runs placed but not started, which a pass may give a tighter shape, and writing that change."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from datetime import datetime

from astraeus.coordinator.placement import Placement
from astraeus.shared import Landing, task_name

from .commit import place_run, placement_row
from .db import Database
from .dialect import Connection
from .queue import QueueRow
from .rows import new_task_uid, when


@dataclass(frozen=True)
class HeldTask:
    """One Assigned worker of a run that may be reshaped: what it holds, where."""

    id: int
    index: int
    machine: str
    gpu_ids: tuple[str, ...]
    cpu_cores: float
    memory_bytes: int


@dataclass(frozen=True)
class Unstarted:
    """A placed run none of whose workers has started: its row, where it landed, what it holds."""

    row: QueueRow
    rung: str
    network: str | None
    nvlink_domain: str | None
    tasks: tuple[HeldTask, ...]


def read_unstarted(database: Database) -> list[Unstarted]:
    """Runs placed whole whose every task is Assigned (none Starting, Running or ended, none
    cancelled), in queue order. Runs on one machine (`node`, the tightest rung) are left out:
    no shape is tighter."""
    rung, array = (
        database.json_text("landing", "rung"),
        database.json_text("spec", "requested_resources.array"),
    )
    runs = database.read(
        "SELECT seq, workspace, name, spec, priority, landing, network, nvlink_domain,"  # noqa: S608 - our own text
        " first_evaluated_at, submitted_at"
        f" FROM runs WHERE state = 'Running' AND {rung} != 'node'"
        f" AND {array} IS NULL"
        " AND NOT EXISTS"
        " (SELECT 1 FROM tasks WHERE tasks.run_seq = runs.seq AND tasks.idx >= 0"
        " AND (tasks.state != 'Assigned' OR tasks.cancel = 1))"
        " ORDER BY priority DESC, seq"
    )
    found = []
    for run in runs:
        tasks = database.read(
            "SELECT id, idx, machine, gpu_ids, cpu_cores, memory_bytes FROM tasks"
            " WHERE run_seq = ? AND idx >= 0 ORDER BY idx",
            (run["seq"],),
        )
        row = QueueRow(
            seq=run["seq"],
            workspace=run["workspace"],
            run=run["name"],
            index=0,
            priority=run["priority"],
            spec=run["spec"],
            first_evaluated_at=when(run["first_evaluated_at"]),
            submitted_at=when(run["submitted_at"]),
        )
        held = tuple(
            HeldTask(
                id=t["id"],
                index=t["idx"],
                machine=t["machine"],
                gpu_ids=tuple(json.loads(t["gpu_ids"])),
                cpu_cores=t["cpu_cores"],
                memory_bytes=t["memory_bytes"],
            )
            for t in tasks
        )
        rung = Landing.model_validate_json(run["landing"]).rung
        found.append(Unstarted(row, rung, run["network"], run["nvlink_domain"], held))
    return found


def commit_reshape(database: Database, old: Unstarted, placement: Placement, now: datetime) -> bool:
    """Release the run's old assignment (`old`) and write `placement` in one transaction.

    Nothing is written (False) when any old worker moved on meanwhile (an agent reported it
    Starting, it ended, or it was cancelled), or when a GPU of the new placement is held (the
    `gpu_holds` key refuses it)."""
    ids = [task.id for task in old.tasks]
    with database.write() as conn:
        marks = ",".join("?" * len(ids))
        still = conn.execute(
            f"SELECT count(*) FROM tasks WHERE run_seq = ? AND id IN ({marks})"  # noqa: S608
            " AND state = 'Assigned' AND cancel = 0",
            (old.row.seq, *ids),
        ).fetchone()[0]
        total = conn.execute(
            "SELECT count(*) FROM tasks WHERE run_seq = ? AND idx >= 0", (old.row.seq,)
        ).fetchone()[0]
        if still != len(ids) or total != len(ids):
            return False
        conn.execute("SAVEPOINT reshape")
        try:
            ok = _swap(conn, old.row, placement, ids, marks, now)
        except sqlite3.IntegrityError:
            ok = False
        conn.execute("RELEASE reshape" if ok else "ROLLBACK TO reshape")
        if not ok:
            conn.execute("RELEASE reshape")
    return ok


def _swap(
    conn: Connection,
    item: QueueRow,
    placement: Placement,
    ids: list[int],
    marks: str,
    now: datetime,
) -> bool:
    conn.execute(f"DELETE FROM gpu_holds WHERE task_id IN ({marks})", ids)  # noqa: S608
    conn.execute(f"DELETE FROM logs WHERE task_id IN ({marks})", ids)  # noqa: S608
    conn.execute(f"DELETE FROM tasks WHERE id IN ({marks})", ids)  # noqa: S608
    conn.execute(
        "INSERT INTO tasks (run_seq, idx, name, state, uid) VALUES (?, 0, ?, 'Pending', ?)",
        (item.seq, task_name(item.run, 0), new_task_uid()),
    )
    return place_run(conn, placement_row(item.seq, item.run, item.index, placement), now)
