"""What agents send, written (task updates, logs), and the task rows their replies are made of.

The rows only: which update moves a task, which tasks end Lost and what an agent is assigned are
decided above (`coordinator/reports.py`, by `coordinator/domain/`'s rules)."""

from __future__ import annotations

import json
import logging
from collections.abc import Collection
from datetime import datetime
from typing import NamedTuple

from astraeus.shared import LogChunk, TaskUpdate

from .db import Database, Row
from .dialect import Connection

log = logging.getLogger(__name__)


class UpdatedTask(NamedTuple):
    """The task an agent's update names, as stored when the update arrives."""

    id: int
    run_seq: int
    state: str
    held: bool
    gpu_ids: list[str]


class Agents:
    def __init__(self, database: Database, log_cap_bytes: int) -> None:
        self._database = database
        self._log_cap = log_cap_bytes

    def holding(self) -> set[str]:
        """The machines that hold GPUs for Lost tasks."""
        rows = self._database.read("SELECT DISTINCT machine FROM tasks WHERE held = 1")
        return {row["machine"] for row in rows}

    def holds(self, machine: str) -> bool:
        """Whether `machine` holds GPUs for a Lost task."""
        held = self._database.read_one(
            "SELECT 1 AS one FROM tasks WHERE machine = ? AND held = 1 LIMIT 1", (machine,)
        )
        return held is not None

    def held(self, machine: str) -> list[Row]:
        """The id and uid of each Lost task holding GPUs on `machine`."""
        return self._database.read(
            "SELECT id, uid FROM tasks WHERE machine = ? AND held = 1", (machine,)
        )

    def live(self, machine: str) -> list[Row]:
        """The machine's live tasks, with what their assignments need of their runs."""
        return self._database.read(
            "SELECT tasks.id, tasks.state, tasks.run_seq, tasks.idx, tasks.name, tasks.uid,"
            " tasks.machine, tasks.port,"
            " tasks.gpu_ids, tasks.cpu_cores, tasks.memory_bytes, tasks.cancel, tasks.stop_grace,"
            " runs.name AS run_name, runs.workspace, runs.spec, runs.network,"
            " runs.nvlink_domain, runs.attempt FROM tasks JOIN runs ON runs.seq = tasks.run_seq"
            " WHERE tasks.machine = ? AND tasks.state IN ('Assigned', 'Starting',"
            " 'Running') ORDER BY tasks.id",
            (machine,),
        )

    def workers(self, runs: Collection[int]) -> list[Row]:
        """Every task of `runs`' attempts now (their workers: index, machine, state, port), in
        one query."""
        marks = ",".join("?" * len(runs))
        return self._database.read(
            f"SELECT run_seq, idx, machine, state, port FROM tasks"  # noqa: S608
            f" WHERE run_seq IN ({marks}) AND idx >= 0 ORDER BY run_seq, idx",
            tuple(runs),
        )

    def append_log(self, conn: Connection, machine: str, chunk: LogChunk) -> None:
        """Apply a chunk by its offsets: what is held already changes nothing (a resend), a
        chunk starting earlier replaces what was held from there on, so the log never
        duplicates or goes out of order."""
        task_id = _task_id(conn, machine, chunk.task_uid)
        if task_id is None:
            return
        held = conn.execute(
            "SELECT coalesce(max(end_offset), 0) FROM logs WHERE task_id = ?", (task_id,)
        ).fetchone()[0]
        if chunk.end <= held:
            return
        cut = conn.execute(
            'SELECT 1 FROM logs WHERE task_id = ? AND "offset" < ? AND end_offset > ? LIMIT 1',
            (task_id, chunk.offset, chunk.offset),
        ).fetchone()
        if cut is not None:
            # Only an agent that cuts its log differently from before does this; keeping the
            # text held is better than a line twice.
            log.warning(
                "machine %s: log chunk at byte %d of task %s starts inside one already held;"
                " ignored",
                machine,
                chunk.offset,
                chunk.task_uid,
            )
            return
        conn.execute(
            'DELETE FROM logs WHERE task_id = ? AND "offset" >= ?', (task_id, chunk.offset)
        )
        conn.execute(
            'INSERT INTO logs (task_id, "offset", end_offset, data) VALUES (?, ?, ?, ?)',
            (task_id, chunk.offset, chunk.end, chunk.data),
        )
        self._trim_log(conn, task_id)

    def _trim_log(self, conn: Connection, task_id: int) -> None:
        """Drop the oldest chunks past the cap."""
        total = 0
        rows = conn.execute(
            'SELECT id, length(data) FROM logs WHERE task_id = ? ORDER BY "offset" DESC, id DESC',
            (task_id,),
        ).fetchall()
        for row_id, size in rows:
            total += size
            if total > self._log_cap:
                conn.execute("DELETE FROM logs WHERE task_id = ? AND id <= ?", (task_id, row_id))
                break


def _task_id(conn: Connection, machine: str, uid: str) -> int | None:
    """The task with this uid, if it is on this machine: an agent speaks for its own only."""
    row = conn.execute(
        "SELECT id FROM tasks WHERE uid = ? AND machine = ?", (uid, machine)
    ).fetchone()
    return int(row[0]) if row else None


def updated_task(conn: Connection, machine: str, uid: str) -> UpdatedTask | None:
    """The task an update names, if it is on this machine: an agent speaks for its own only."""
    row = conn.execute(
        "SELECT id, run_seq, state, held, gpu_ids FROM tasks WHERE uid = ? AND machine = ?",
        (uid, machine),
    ).fetchone()
    if row is None:
        return None
    return UpdatedTask(int(row[0]), int(row[1]), str(row[2]), bool(row[3]), json.loads(row[4]))


def write_forward(conn: Connection, task_id: int, update: TaskUpdate) -> None:
    """The task takes the update's live state (and its message, when it has one)."""
    at = update.at.isoformat()
    conn.execute(
        "UPDATE tasks SET state = ?, message = coalesce(?, message),"
        " started_at = coalesce(started_at, ?) WHERE id = ?",
        (update.state.value, update.message, at, task_id),
    )


def write_end(conn: Connection, task_id: int, update: TaskUpdate, fault: str | None = None) -> None:
    """The task ends in the update's state; its GPUs, cores and memory return. `fault`: the
    GPU fault it ended by, kept and added to its message."""
    at = update.at.isoformat()
    message = update.message
    if fault is not None:
        message = f"{message}; {fault}" if message else fault
    conn.execute(
        "UPDATE tasks SET state = ?, exit_code = ?, message = ?, ended_at = ?,"
        " started_at = coalesce(started_at, ?), fault = ? WHERE id = ?",
        (update.state.value, update.exit_code, message, at, at, fault, task_id),
    )
    conn.execute("DELETE FROM gpu_holds WHERE task_id = ?", (task_id,))


def write_lost(conn: Connection, task_id: int, message: str, now: datetime) -> int | None:
    """A started task ends Lost and its GPUs return; the run's seq, or None when the task was
    not Starting or Running (nothing written)."""
    row = conn.execute(
        "UPDATE tasks SET state = 'Lost', message = ?, ended_at = ? WHERE id = ?"
        " AND state IN ('Starting', 'Running') RETURNING run_seq",
        (message, now.isoformat(), task_id),
    ).fetchone()
    if row is None:
        return None
    conn.execute("DELETE FROM gpu_holds WHERE task_id = ?", (task_id,))
    return int(row[0])


def write_release(conn: Connection, task_id: int, note: str = "") -> None:
    """A Lost task's GPUs, cores and memory return (`note` added to its message)."""
    conn.execute(
        "UPDATE tasks SET held = 0, message = coalesce(message, '') || ? WHERE id = ?",
        (note, task_id),
    )
    conn.execute("DELETE FROM gpu_holds WHERE task_id = ?", (task_id,))


def live_tasks_on(conn: Connection, machine: str) -> list[tuple[int, int]]:
    """The id and run of each live task on `machine`, inside the caller's transaction."""
    rows = conn.execute(
        "SELECT id, run_seq FROM tasks WHERE machine = ?"
        " AND state IN ('Assigned', 'Starting', 'Running')",
        (machine,),
    ).fetchall()
    return [(int(task_id), int(run_seq)) for task_id, run_seq in rows]


def held_on(conn: Connection, machine: str) -> list[int]:
    """The id of each Lost task holding GPUs on `machine`, inside the caller's transaction."""
    rows = conn.execute("SELECT id FROM tasks WHERE machine = ? AND held = 1", (machine,))
    return [int(row[0]) for row in rows.fetchall()]


def write_lost_freed(conn: Connection, task_id: int, message: str, now: datetime) -> int:
    """A live task (of any live state) ends Lost and its GPUs, cores and memory return at once;
    returns its run's seq."""
    row = conn.execute(
        "UPDATE tasks SET state = 'Lost', message = ?, ended_at = ?, held = 0 WHERE id = ?"
        " RETURNING run_seq",
        (message, now.isoformat(), task_id),
    ).fetchone()
    conn.execute("DELETE FROM gpu_holds WHERE task_id = ?", (task_id,))
    return int(row[0])


def gpus_held_on(conn: Connection, machine: str) -> int:
    """How many of `machine`'s GPUs tasks hold (live ones and held Lost ones)."""
    row = conn.execute("SELECT count(*) FROM gpu_holds WHERE machine = ?", (machine,)).fetchone()
    return int(row[0])


def task_names(conn: Connection, task_ids: Collection[int]) -> list[str]:
    """`workspace/task` of each task (names repeat across workspaces), in id order."""
    found = []
    for task_id in sorted(task_ids):
        row = conn.execute(
            "SELECT runs.workspace, tasks.name FROM tasks JOIN runs ON runs.seq = tasks.run_seq"
            " WHERE tasks.id = ?",
            (task_id,),
        ).fetchone()
        found.append(f"{row[0]}/{row[1]}")
    return found


def write_lost_held(conn: Connection, task_id: int, message: str, now: datetime) -> None:
    """The task is Lost, its GPUs, cores and memory still held on its machine (`held`)."""
    conn.execute(
        "UPDATE tasks SET state = 'Lost', message = ?, ended_at = ?, held = 1 WHERE id = ?",
        (message, now.isoformat(), task_id),
    )
