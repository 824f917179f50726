"""Writing a scheduler pass: placements and explanations in one transaction, and Lost tasks."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Protocol

from astraeus.coordinator.placement import Placement
from astraeus.shared import PendingExplanation, task_name
from astraeus.shared.explanation import RejectionGroup
from astraeus.shared.reasons import ReasonKind

from .db import Database
from .rows import new_task_uid
from .runs import settle_run


class Slot(Protocol):
    """Which pending task a decision is about: the run (`seq`, its name `run`) and the array
    element (`index`; 0 for a run placed whole)."""

    @property
    def seq(self) -> int: ...
    @property
    def run(self) -> str: ...
    @property
    def index(self) -> int: ...


class Placing(Protocol):
    """A decision to place `item` as `placement` (the scheduler's `Placed`)."""

    @property
    def item(self) -> Slot: ...
    @property
    def placement(self) -> Placement: ...


class Explaining(Protocol):
    """A decision to leave `item` pending, with the reason, its kind and the explanation
    (the scheduler's `Waiting`)."""

    @property
    def item(self) -> Slot: ...
    @property
    def reason(self) -> str: ...
    @property
    def kind(self) -> ReasonKind: ...
    @property
    def explanation(self) -> PendingExplanation | None: ...
    @property
    def rejections(self) -> Sequence[RejectionGroup]: ...


def commit_pass(
    database: Database,
    placed: Sequence[Placing],
    waiting: Sequence[Explaining],
    now: datetime,
    stored: dict[int, int] | None = None,
) -> int:
    """Store a pass; returns how many placements were committed.

    A placement is skipped when its run stopped being pending meanwhile (cancelled while the
    pass was computed). Each placement has its own savepoint, so a GPU already held (which the
    `gpu_holds` key refuses) loses that run its placement, not the pass. Each distinct
    explanation is stored once; `stored` maps explanations already written in this pass (by
    object identity) to their rows, across calls."""
    stored = {} if stored is None else stored
    committed = 0
    with database.write() as conn:
        for decision in placed:
            conn.execute("SAVEPOINT place")
            try:
                ok = place_run(conn, decision.item, decision.placement, now)
            except sqlite3.IntegrityError:
                ok = False
            conn.execute("RELEASE place" if ok else "ROLLBACK TO place")
            if not ok:
                conn.execute("RELEASE place")
            committed += ok
        for wait in waiting:
            _explain(conn, wait, now, stored)
    return committed


def place_run(conn: sqlite3.Connection, item: Slot, placement: Placement, now: datetime) -> bool:
    """Assign a Pending run (or array element) its workers and their GPUs; False when it is no
    longer pending. Worker `n` is task `item.index + n`: an array element is one worker at its
    own index, a whole run's workers are tasks 0 to n-1."""
    stamp = now.isoformat()
    pending = conn.execute(
        "SELECT 1 FROM tasks JOIN runs ON runs.seq = tasks.run_seq WHERE tasks.run_seq = ?"
        " AND tasks.idx = ? AND tasks.state = 'Pending' AND runs.state IN ('Pending', 'Running')",
        (item.seq, item.index),
    ).fetchone()
    if pending is None:
        return False
    for offset, worker in enumerate(placement.workers):
        index = item.index + offset
        cursor = conn.execute(
            "INSERT INTO tasks (run_seq, idx, name, state, machine, gpu_ids, cpu_cores,"
            " memory_bytes, assigned_at, uid) VALUES (?, ?, ?, 'Assigned', ?, ?, ?, ?, ?, ?)"
            # A fresh uid per placement: an agent never mistakes this one for an earlier one.
            " ON CONFLICT (run_seq, idx) DO UPDATE SET state = 'Assigned', uid = excluded.uid,"
            " machine = excluded.machine, gpu_ids = excluded.gpu_ids,"
            " cpu_cores = excluded.cpu_cores, memory_bytes = excluded.memory_bytes,"
            " assigned_at = excluded.assigned_at, reason = NULL, reason_kind = NULL,"
            " explanation_id = NULL"
            " RETURNING id",
            (
                item.seq,
                index,
                task_name(item.run, index),
                worker.machine,
                json.dumps(list(worker.gpu_ids)),
                worker.cpu_cores,
                worker.memory_bytes,
                stamp,
                new_task_uid(),
            ),
        )
        task_id = int(cursor.fetchone()[0])
        conn.executemany(
            "INSERT INTO gpu_holds (machine, gpu_id, task_id) VALUES (?, ?, ?)",
            [(worker.machine, gpu, task_id) for gpu in worker.gpu_ids],
        )
    conn.execute(
        "UPDATE runs SET state = 'Running', reason = NULL, reason_kind = NULL, shape = ?,"
        " landing = ?, network = ?, nvlink_domain = ?,"
        " first_evaluated_at = coalesce(first_evaluated_at, ?) WHERE seq = ?",
        (
            placement.shape.model_dump_json(),
            placement.landing.model_dump_json(),
            placement.network.value,
            placement.nvlink_domain,
            stamp,
            item.seq,
        ),
    )
    return True


def _explain(
    conn: sqlite3.Connection, wait: Explaining, now: datetime, stored: dict[int, int]
) -> None:
    item = wait.item
    row_id = None
    if wait.explanation is not None:
        row_id = stored.get(id(wait.explanation))
        if row_id is None:
            cursor = conn.execute(
                "INSERT INTO explanations (body, rejections) VALUES (?, ?)",
                (wait.explanation.model_dump_json(), _json_list(wait.rejections)),
            )
            row_id = stored[id(wait.explanation)] = int(cursor.lastrowid or 0)
    conn.execute(
        "UPDATE tasks SET reason = ?, reason_kind = ?,"
        " explanation_id = coalesce(?, explanation_id)"
        " WHERE run_seq = ? AND idx = ? AND state = 'Pending'",
        (wait.reason, wait.kind.value, row_id, item.seq, item.index),
    )
    conn.execute(
        "UPDATE runs SET reason = CASE WHEN state = 'Pending' THEN ? ELSE reason END,"
        " reason_kind = CASE WHEN state = 'Pending' THEN ? ELSE reason_kind END,"
        " first_evaluated_at = coalesce(first_evaluated_at, ?) WHERE seq = ?",
        (wait.reason, wait.kind.value, now.isoformat(), item.seq),
    )


def _json_list(groups: Sequence[RejectionGroup]) -> str:
    return "[" + ",".join(group.model_dump_json() for group in groups) + "]"


def drop_unused_explanations(database: Database) -> None:
    """Explanations no task points at any more (placed, ended, or explained anew)."""
    with database.write() as conn:
        conn.execute(
            "DELETE FROM explanations WHERE id NOT IN"
            " (SELECT explanation_id FROM tasks WHERE explanation_id IS NOT NULL)"
        )


def mark_lost(database: Database, machines: Iterable[tuple[str, str]], now: datetime) -> int:
    """Live tasks on each (machine, message) become Lost; returns the count.

    Their GPUs, cores and memory stay held on that machine (`held`): a silent machine may be cut
    off, not dead, with its workers still running. They return once its agent reports the
    worker gone, or reports back without it (`Agents.reply`)."""
    lost = 0
    with database.write() as conn:
        for machine, message in machines:
            rows = conn.execute(
                "SELECT id, run_seq FROM tasks WHERE machine = ?"
                " AND state IN ('Assigned', 'Starting', 'Running')",
                (machine,),
            ).fetchall()
            for task_id, run_seq in rows:
                conn.execute(
                    "UPDATE tasks SET state = 'Lost', message = ?, ended_at = ?, held = 1"
                    " WHERE id = ?",
                    (message, now.isoformat(), task_id),
                )
                settle_run(conn, run_seq, now)
                lost += 1
    return lost
