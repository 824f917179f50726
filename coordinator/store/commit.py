"""Writing a scheduler pass: placements and explanations in one transaction.

Decisions arrive as rows ready to write (`PlacementRow`, `ExplanationRow`: named tuples of
strings and numbers, JSON already written, made where the pass was decided), so the service's
writer spends its turns on SQL, and a pass decided in the worker process crosses the pipe as
tuples, not models (unpickling 10,000 placements as models took ~300 ms of the service's GIL).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from astraeus.coordinator.placement import Placement
from astraeus.shared import PendingExplanation, task_name
from astraeus.shared.explanation import RejectionGroup

from .db import Database
from .dialect import Connection
from .rows import new_task_uid


class WorkerRow(NamedTuple):
    """One worker of a placement as its task row holds it (`gpu_ids` as JSON)."""

    machine: str
    gpu_ids: tuple[str, ...]
    gpu_ids_json: str
    cpu_cores: float
    memory_bytes: int


class PlacementRow(NamedTuple):
    """A decision to place a pending run (`seq`, named `run`) or array element (`element`; 0
    for a run placed whole) as the store writes it: its workers, and the run's shape, landing
    (JSON), network and NVLink domain."""

    seq: int
    run: str
    element: int
    workers: tuple[WorkerRow, ...]
    shape: str
    landing: str
    network: str
    nvlink_domain: str | None


def placement_row(seq: int, run: str, element: int, placement: Placement) -> PlacementRow:
    return PlacementRow(
        seq,
        run,
        element,
        tuple(
            WorkerRow(
                w.machine,
                tuple(w.gpu_ids),
                json.dumps(list(w.gpu_ids)),
                w.cpu_cores,
                w.memory_bytes,
            )
            for w in placement.workers
        ),
        placement.shape.model_dump_json(),
        placement.landing.model_dump_json(),
        placement.network.value,
        placement.nvlink_domain,
    )


class ExplanationRow(NamedTuple):
    """An explanation as stored, once per pass however many runs share it (`key`, unique in
    the pass): its body and what keeps each machine out, as JSON."""

    key: int
    body: str
    rejections: str


def explanation_row(
    key: int, explanation: PendingExplanation, rejections: Sequence[RejectionGroup]
) -> ExplanationRow:
    listed = "[" + ",".join(group.model_dump_json() for group in rejections) + "]"
    return ExplanationRow(key, explanation.model_dump_json(), listed)


class WaitingRow(NamedTuple):
    """A decision to leave a pending run or array element waiting: the reason, its kind
    (`ReasonKind`'s value) and the explanation."""

    seq: int
    run: str
    element: int
    reason: str
    kind: str
    explanation: ExplanationRow | None


def commit_pass(
    database: Database,
    placed: Sequence[PlacementRow],
    waiting: Sequence[WaitingRow],
    now: datetime,
    stored: dict[int, int] | None = None,
) -> int:
    """Store a pass; returns how many placements were committed.

    A placement is skipped when its run stopped being pending meanwhile (cancelled while the
    pass was computed). Each placement has its own savepoint, so a GPU already held (which the
    `gpu_holds` key refuses) loses that run its placement, not the pass. Each distinct
    explanation is stored once; `stored` maps explanations already written in this pass (by
    `key`) to their rows, across calls.

    A chunk is first written whole, without the savepoints, in a handful of statements
    (`place_runs`: on PostgreSQL each is one round trip, not one per placement): a held GPU is
    never expected, since passes never overlap and only a pass takes GPUs. If one is met all
    the same, that transaction is rolled back whole and the chunk written again one placement
    at a time, each in its savepoint."""
    stored = {} if stored is None else stored
    before = dict(stored)
    try:
        return _write_pass(database, placed, waiting, now, stored, guarded=False)
    except sqlite3.IntegrityError:
        stored.clear()
        stored.update(before)  # those rows were rolled back
        return _write_pass(database, placed, waiting, now, stored, guarded=True)


def _write_pass(
    database: Database,
    placed: Sequence[PlacementRow],
    waiting: Sequence[WaitingRow],
    now: datetime,
    stored: dict[int, int],
    *,
    guarded: bool,
) -> int:
    committed = 0
    with database.write() as conn:
        if not guarded:
            committed = place_runs(conn, placed, now)
        for decision in placed if guarded else ():
            conn.execute("SAVEPOINT place")
            try:
                ok = place_run(conn, decision, now)
            except sqlite3.IntegrityError:
                ok = False
            conn.execute("RELEASE place" if ok else "ROLLBACK TO place")
            if not ok:
                conn.execute("RELEASE place")
            committed += ok
        for wait in waiting:
            _explain(conn, wait, now, stored)
    return committed


PENDING_CHECK = 400
"""Placements whose tasks are checked Pending in one statement (two parameters each)."""


def place_runs(conn: Connection, placements: Sequence[PlacementRow], now: datetime) -> int:
    """`place_run` for many placements in a handful of statements, not five per placement:
    which are still pending is read at once, then the tasks, the GPU holds and the runs are
    each written with one `executemany` (on PostgreSQL one round trip each, not one per row).
    The same rows as `place_run` one after another; a held GPU raises `IntegrityError` (the
    caller then writes them one by one, each in its savepoint). Returns how many were placed."""
    pending = _still_pending(conn, placements)
    stamp = now.isoformat()
    tasks: list[tuple[object, ...]] = []
    holds: list[tuple[object, ...]] = []
    runs: list[tuple[object, ...]] = []
    for placement in placements:
        key = (placement.seq, placement.element)
        if key not in pending:
            continue
        pending.discard(key)  # placed once: a second decision for it finds it taken
        for offset, worker in enumerate(placement.workers):
            index = placement.element + offset
            tasks.append(_task_values(placement, index, worker, stamp))
            holds += [(worker.machine, gpu, placement.seq, index) for gpu in worker.gpu_ids]
        runs.append(_run_values(placement, stamp))
    conn.executemany(PLACE_TASK, tasks)
    conn.executemany(
        "INSERT INTO gpu_holds (machine, gpu_id, task_id)"
        " SELECT ?, ?, id FROM tasks WHERE run_seq = ? AND idx = ?",
        holds,
    )
    conn.executemany(PLACE_RUN, runs)
    return len(runs)


def _still_pending(conn: Connection, placements: Sequence[PlacementRow]) -> set[tuple[int, int]]:
    """(run, task index) of each placement whose task is still Pending in a live run."""
    keys = list(dict.fromkeys((p.seq, p.element) for p in placements))
    found: set[tuple[int, int]] = set()
    for at in range(0, len(keys), PENDING_CHECK):
        chunk = keys[at : at + PENDING_CHECK]
        pairs = ", ".join("(?, ?)" for _ in chunk)
        rows = conn.execute(
            "SELECT tasks.run_seq, tasks.idx FROM tasks JOIN runs"  # noqa: S608 - marks only
            " ON runs.seq = tasks.run_seq"
            " WHERE tasks.state = 'Pending' AND runs.state IN ('Pending', 'Running')"
            f" AND (tasks.run_seq, tasks.idx) IN (VALUES {pairs})",
            [value for key in chunk for value in key],
        ).fetchall()
        found.update((int(seq), int(idx)) for seq, idx in rows)
    return found


PLACE_TASK = (
    "INSERT INTO tasks (run_seq, idx, name, state, machine, gpu_ids, cpu_cores,"
    " memory_bytes, assigned_at, uid) VALUES (?, ?, ?, 'Assigned', ?, ?, ?, ?, ?, ?)"
    # A fresh uid per placement: an agent never mistakes this one for an earlier one.
    " ON CONFLICT (run_seq, idx) DO UPDATE SET state = 'Assigned', uid = excluded.uid,"
    " machine = excluded.machine, gpu_ids = excluded.gpu_ids,"
    " cpu_cores = excluded.cpu_cores, memory_bytes = excluded.memory_bytes,"
    " assigned_at = excluded.assigned_at, reason = NULL, reason_kind = NULL,"
    " explanation_id = NULL"
)

PLACE_RUN = (
    "UPDATE runs SET state = 'Running', reason = NULL, reason_kind = NULL, shape = ?,"
    " landing = ?, network = ?, nvlink_domain = ?,"
    " first_evaluated_at = coalesce(first_evaluated_at, ?) WHERE seq = ?"
)


def _task_values(
    placement: PlacementRow, index: int, worker: WorkerRow, stamp: str
) -> tuple[object, ...]:
    return (
        placement.seq,
        index,
        task_name(placement.run, index),
        worker.machine,
        worker.gpu_ids_json,
        worker.cpu_cores,
        worker.memory_bytes,
        stamp,
        new_task_uid(),
    )


def _run_values(placement: PlacementRow, stamp: str) -> tuple[object, ...]:
    return (
        placement.shape,
        placement.landing,
        placement.network,
        placement.nvlink_domain,
        stamp,
        placement.seq,
    )


def place_run(conn: Connection, placement: PlacementRow, now: datetime) -> bool:
    """Assign a Pending run (or array element) its workers and their GPUs; False when it is no
    longer pending. Worker `n` is task `element + n`: an array element is one worker at its
    own index, a whole run's workers are tasks 0 to n-1."""
    stamp = now.isoformat()
    seq, element = placement.seq, placement.element
    pending = conn.execute(
        "SELECT 1 FROM tasks JOIN runs ON runs.seq = tasks.run_seq WHERE tasks.run_seq = ?"
        " AND tasks.idx = ? AND tasks.state = 'Pending' AND runs.state IN ('Pending', 'Running')",
        (seq, element),
    ).fetchone()
    if pending is None:
        return False
    for offset, worker in enumerate(placement.workers):
        index = element + offset
        cursor = conn.execute(
            PLACE_TASK + " RETURNING id", _task_values(placement, index, worker, stamp)
        )
        task_id = int(cursor.fetchone()[0])
        conn.executemany(
            "INSERT INTO gpu_holds (machine, gpu_id, task_id) VALUES (?, ?, ?)",
            [(worker.machine, gpu, task_id) for gpu in worker.gpu_ids],
        )
    conn.execute(PLACE_RUN, _run_values(placement, stamp))
    return True


def _explain(conn: Connection, wait: WaitingRow, now: datetime, stored: dict[int, int]) -> None:
    explanation = wait.explanation
    row_id = None
    if explanation is not None:
        row_id = stored.get(explanation.key)
        if row_id is None:
            cursor = conn.execute(
                "INSERT INTO explanations (body, rejections) VALUES (?, ?) RETURNING id",
                (explanation.body, explanation.rejections),
            )
            row_id = stored[explanation.key] = int(cursor.fetchone()[0])
    conn.execute(
        "UPDATE tasks SET reason = ?, reason_kind = ?,"
        " explanation_id = coalesce(?, explanation_id)"
        " WHERE run_seq = ? AND idx = ? AND state = 'Pending'",
        (wait.reason, wait.kind, row_id, wait.seq, wait.element),
    )
    conn.execute(
        "UPDATE runs SET reason = CASE WHEN state = 'Pending' THEN ? ELSE reason END,"
        " reason_kind = CASE WHEN state = 'Pending' THEN ? ELSE reason_kind END,"
        " first_evaluated_at = coalesce(first_evaluated_at, ?) WHERE seq = ?",
        (wait.reason, wait.kind, now.isoformat(), wait.seq),
    )


def drop_unused_explanations(database: Database) -> None:
    """Explanations no task points at any more (placed, ended, or explained anew)."""
    with database.write() as conn:
        conn.execute(
            "DELETE FROM explanations WHERE id NOT IN"
            " (SELECT explanation_id FROM tasks WHERE explanation_id IS NOT NULL)"
        )
