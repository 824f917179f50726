"""Runs and their tasks: submission, queries, cancellation, and the rows a run's state is settled
by (the rules: `domain/lifecycle.py`, applied by `coordinator/reports.py`)."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from typing import NamedTuple

from astraeus.shared import Attempt, Run, RunSpec, RunState, Task, TaskState, task_name
from astraeus.shared.reasons import PREEMPTED, RECLAIMED, ReasonKind, requeued_after_fault

from .db import Database, Row
from .dialect import Connection
from .rows import (
    RUN_FIELDS,
    TASK_SELECT,
    attempt_from_row,
    new_task_uid,
    run_from_row,
    task_from_row,
)

LIVE = tuple(state.value for state in TaskState if state.holds_resources)

CURRENT = "tasks.idx >= 0"
"""A task of the run's attempt now. An earlier attempt's tasks keep their rows (a Lost one may
still hold GPUs until its agent reports the worker gone, and their usage counts) at negative
indexes (`requeue`), out of the way of the run's new tasks 0, 1, …"""

RETIRED_STRIDE = 1_000_000
"""Attempt `n`'s task `i` is kept at index `-(n * RETIRED_STRIDE + i) - 1` once retired."""

OF_ATTEMPT = (
    f"(runs.attempt = ? AND {CURRENT} OR tasks.idx < 0 AND (-tasks.idx - 1) / {RETIRED_STRIDE} = ?)"
)
"""A task of attempt `?` of its run, now or retired (the attempt, twice)."""


class NameTakenError(Exception):
    """A run of that name is live in the workspace (not ended): its name cannot be used again
    yet. `state`: that run's state."""

    def __init__(self, name: str, state: RunState) -> None:
        super().__init__(name)
        self.state = state


class RunLiveError(Exception):
    """The run has not ended, so it cannot be deleted. `state`: its state."""

    def __init__(self, name: str, state: RunState) -> None:
        super().__init__(name)
        self.state = state


NAMED = "runs.retired_at IS NULL"
"""A run its name reaches: not retired. A retired run (its name used again, or deleted) keeps
its rows under its uid, renamed `<name>~<uid>` out of the way of the name."""

RETIRED_MARK = "~"
"""Between a retired run's name and its uid; never in a run's name (`RunName`)."""


def submitted_name(stored: str) -> str:
    """The name a run was submitted with, retired or not (`finetune~<uid>` is `finetune`): what
    its workers (`ASTRAEUS_RUN`) and the cluster map still call a retired run's stopping task."""
    return stored.partition(RETIRED_MARK)[0]


class Runs:
    def __init__(self, database: Database) -> None:
        self._database = database

    def submit(self, spec: RunSpec, workspace: str, now: datetime) -> Run:
        """Store a run and its pending tasks: one per array element, else one until placed.
        The name may be one an ended run of the workspace has: that run is retired (kept under
        its uid, out of the name's way); one of a live run raises `NameTakenError`."""
        body = spec.model_dump(mode="json", include=set(RUN_FIELDS), exclude_none=True)
        array = spec.requested_resources.array
        try:
            with self._database.write() as conn:
                _free_name(conn, workspace, spec.name, now)
                cursor = conn.execute(
                    "INSERT INTO runs (workspace, name, uid, spec, priority, state, submitted_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING seq",
                    (
                        workspace,
                        spec.name,
                        new_task_uid(),  # a uuid4, as each task's
                        json.dumps(body),
                        spec.priority,
                        "Pending",
                        now.isoformat(),
                    ),
                )
                seq = int(cursor.fetchone()[0])
                conn.executemany(
                    "INSERT INTO tasks (run_seq, idx, name, state, uid)"
                    " VALUES (?, ?, ?, 'Pending', ?)",
                    [
                        (seq, i, task_name(spec.name, i), new_task_uid())
                        for i in range(array.size if array else 1)
                    ],
                )
        except sqlite3.IntegrityError:  # submitted meanwhile by another coordinator's writer
            raise NameTakenError(spec.name, RunState.PENDING) from None
        run = self.get(workspace, spec.name)
        assert run is not None  # noqa: S101 - just written in this thread
        return run

    def _run_row(self, workspace: str, name: str) -> Row | None:
        return self._database.read_one(
            f"SELECT * FROM runs WHERE workspace = ? AND name = ? AND {NAMED}",  # noqa: S608
            (workspace, name),
        )

    def get(self, workspace: str, name: str) -> Run | None:
        row = self._run_row(workspace, name)
        if row is None:
            return None
        return self._run(row)

    def _run(self, row: Row) -> Run:
        return run_from_row(row, self._tasks(row["seq"]), self._earlier(row))

    def _tasks(self, seq: int) -> list[Task]:
        rows = self._database.read(
            f"{TASK_SELECT} WHERE run_seq = ? AND {CURRENT} ORDER BY idx",
            (seq,),
        )
        return [task_from_row(row) for row in rows]

    def _earlier(self, row: Row) -> list[Attempt]:
        """The run's attempts that ended before the one now (none to read on a first one)."""
        if row["attempt"] == 1:
            return []
        rows = self._database.read(
            "SELECT * FROM run_attempts WHERE run_seq = ? ORDER BY number", (row["seq"],)
        )
        return [attempt_from_row(found) for found in rows]

    def find(self, workspace: str | None, state: RunState | None, limit: int = 1000) -> list[Run]:
        where, params = _filters(workspace, state)
        rows = self._database.read(
            f"SELECT * FROM runs {where} ORDER BY seq LIMIT ?",  # noqa: S608 - fixed clauses
            (*params, limit),
        )
        return [self._run(row) for row in rows]

    def task(self, workspace: str, name: str) -> Task | None:
        row = self._database.read_one(
            f"{TASK_SELECT} WHERE runs.workspace = ? AND tasks.name = ? AND {CURRENT} AND {NAMED}",
            (workspace, name),
        )
        return task_from_row(row) if row else None

    def logs(self, workspace: str, name: str, attempt: int | None = None) -> tuple[int, str] | None:
        """The kept part of a task's log: where it starts, and the text. `attempt`: of that
        attempt of its run (an earlier one's task is kept at its negative index, `requeue`);
        None: of the attempt now."""
        which, more = (CURRENT, ()) if attempt is None else (OF_ATTEMPT, (attempt, attempt))
        row = self._database.read_one(
            "SELECT tasks.id FROM tasks JOIN runs ON runs.seq = tasks.run_seq"  # noqa: S608
            f" WHERE runs.workspace = ? AND tasks.name = ? AND {which} AND {NAMED}",
            (workspace, name, *more),
        )
        if row is None:
            return None
        chunks = self._database.read(
            'SELECT "offset", data FROM logs WHERE task_id = ? ORDER BY "offset", id', (row["id"],)
        )
        if not chunks:
            return 0, ""
        return chunks[0]["offset"], "".join(c["data"] for c in chunks)

    def cancel(self, workspace: str, name: str, now: datetime) -> Run | None:
        """Pending tasks end now; live ones are told to stop and end when their agent says so."""
        row = self._run_row(workspace, name)
        if row is None:
            return None
        if not RunState(row["state"]).ended:
            with self._database.write() as conn:
                conn.execute(
                    "UPDATE tasks SET state = 'Cancelled', ended_at = ?"
                    " WHERE run_seq = ? AND state = 'Pending'",
                    (now.isoformat(), row["seq"]),
                )
                conn.execute(
                    "UPDATE tasks SET cancel = 1 WHERE run_seq = ?"
                    " AND state IN ('Assigned', 'Starting', 'Running')",
                    (row["seq"],),
                )
                conn.execute(
                    "UPDATE runs SET state = 'Cancelled', reason = 'cancelled by user',"
                    " reason_kind = NULL, ended_at = ? WHERE seq = ?",
                    (now.isoformat(), row["seq"]),
                )
        return self.get(workspace, name)

    def delete(self, workspace: str, name: str, now: datetime) -> Run | None:
        """Remove an ended run from the workspace's runs (retire it: its name is free, and
        list, status and logs no longer show it); its log chunks go, the rows its usage was
        counted by stay (a Lost task's that may still hold GPUs too, so they stay held). The
        run as it was; None when there is no such run; `RunLiveError` when it has not ended."""
        before = self.get(workspace, name)
        if before is None:
            return None
        with self._database.write() as conn:
            row = conn.execute(
                f"SELECT seq, state FROM runs WHERE workspace = ? AND name = ? AND {NAMED}",  # noqa: S608
                (workspace, name),
            ).fetchone()
            if row is None:
                return None
            if not RunState(row[1]).ended:
                raise RunLiveError(name, RunState(row[1]))
            conn.execute(
                "DELETE FROM logs WHERE task_id IN (SELECT id FROM tasks WHERE run_seq = ?)",
                (row[0],),
            )
            _retire(conn, int(row[0]), now)
        return before.model_copy(update={"state": RunState(row[1])})

    def pending_kinds(self) -> dict[ReasonKind, int]:
        """Pending runs by the kind of their reason; a run not yet explained is `NotEvaluated`."""
        rows = self._database.read(
            "SELECT reason_kind, count(*) AS n FROM runs WHERE state = 'Pending'"
            " GROUP BY reason_kind"
        )
        counts: dict[ReasonKind, int] = {}
        for row in rows:
            kind = ReasonKind(row["reason_kind"] or ReasonKind.NOT_EVALUATED)
            counts[kind] = counts.get(kind, 0) + row["n"]
        return counts

    def gpu_owners(self, machine: str) -> dict[str, tuple[str, str]]:
        """GPU UUID to the (workspace, task name) holding it, on one machine."""
        rows = self._database.read(
            "SELECT gpu_holds.gpu_id, runs.workspace, tasks.name FROM gpu_holds"
            " JOIN tasks ON tasks.id = gpu_holds.task_id JOIN runs ON runs.seq = tasks.run_seq"
            " WHERE gpu_holds.machine = ?",
            (machine,),
        )
        return {r["gpu_id"]: (r["workspace"], r["name"]) for r in rows}

    def held_gpu_ids(self) -> set[tuple[str, str]]:
        """(machine, GPU UUID) of every GPU a live task holds."""
        rows = self._database.read("SELECT machine, gpu_id FROM gpu_holds")
        return {(r["machine"], r["gpu_id"]) for r in rows}

    def pending_more_than(self, count: int) -> bool:
        """Whether more than `count` runs are Pending (counted no further than that)."""
        row = self._database.read_one(
            "SELECT count(*) AS n FROM (SELECT 1 FROM runs WHERE state = 'Pending' LIMIT ?) AS p",
            (count + 1,),
        )
        return row is not None and int(row["n"]) > count

    def counts_by_state(self) -> dict[str, int]:
        rows = self._database.read("SELECT state, count(*) AS n FROM runs GROUP BY state")
        return {row["state"]: row["n"] for row in rows}


def _free_name(conn: Connection, workspace: str, name: str, now: datetime) -> None:
    """Make `name` free in `workspace` for a new run, inside the submission's transaction: an
    ended run of that name is retired; a live one raises `NameTakenError`. Only the
    workspace's own runs are read: a name of another workspace is another run."""
    row = conn.execute(
        f"SELECT seq, state FROM runs WHERE workspace = ? AND name = ? AND {NAMED}",  # noqa: S608
        (workspace, name),
    ).fetchone()
    if row is None:
        return
    if not RunState(row[1]).ended:
        raise NameTakenError(name, RunState(row[1]))
    _retire(conn, int(row[0]), now)


def _retire(conn: Connection, seq: int, now: datetime) -> None:
    """The run out of its name's way, kept under its uid: `<name>~<uid>`, retired now."""
    conn.execute(
        "UPDATE runs SET name = name || ? || uid, retired_at = ? WHERE seq = ?",
        (RETIRED_MARK, now.isoformat(), seq),
    )


def _filters(workspace: str | None, state: RunState | None) -> tuple[str, tuple[object, ...]]:
    clauses: list[str] = ["retired_at IS NULL"]
    params: list[object] = []
    if workspace is not None:
        clauses.append("workspace = ?")
        params.append(workspace)
    if state is not None:
        clauses.append("state = ?")
        params.append(state.value)
    return "WHERE " + " AND ".join(clauses), tuple(params)


class RunTasks(NamedTuple):
    """A run not ended yet, with its (current attempt's) tasks, to settle its state by."""

    is_array: bool
    tasks: list[tuple[str, str, int | None, str | None]]
    """Each task's name, state, exit code and message, in index order."""
    faults: list[str | None]
    """Each task's GPU fault (`tasks.fault`), in the same order."""
    ran_seconds: list[float | None]
    """How long each task's worker ran (start to end), in the same order; None if unknown."""
    time_limit_seconds: int | None
    retries: int
    retry_on_failure: bool
    attempt: int
    preempting: bool = False
    """Its workers were told to stop for a higher-priority run (`store/preemption.py`)."""
    preemptions: int = 0
    """Times it was preempted: attempts that use up no retry."""

    @property
    def states(self) -> list[TaskState]:
        return [TaskState(task[1]) for task in self.tasks]


def run_tasks(conn: Connection, seq: int) -> RunTasks | None:
    """The run's tasks, inside the caller's transaction; None when the run ended (or is gone)."""
    run = conn.execute(
        "SELECT state, spec, attempt, preempting, preemptions FROM runs WHERE seq = ?", (seq,)
    ).fetchone()
    if run is None or RunState(run[0]).ended:
        return None
    rows = conn.execute(
        "SELECT name, state, exit_code, message, fault, started_at, ended_at FROM tasks"  # noqa: S608
        f" WHERE run_seq = ? AND {CURRENT} ORDER BY idx",
        (seq,),
    ).fetchall()
    spec = json.loads(run[1])
    return RunTasks(
        is_array=spec["requested_resources"].get("array") is not None,
        tasks=[(row[0], row[1], row[2], row[3]) for row in rows],
        faults=[row[4] for row in rows],
        ran_seconds=[_seconds(row[5], row[6]) for row in rows],
        time_limit_seconds=spec.get("time_limit_seconds"),
        retries=int(spec.get("retries", 0)),
        retry_on_failure=bool(spec.get("retry_on_failure", False)),
        attempt=int(run[2]),
        preempting=bool(run[3]),
        preemptions=int(run[4]),
    )


def _seconds(started: str | None, ended: str | None) -> float | None:
    if started is None or ended is None:
        return None
    return (datetime.fromisoformat(ended) - datetime.fromisoformat(started)).total_seconds()


def stop_live_tasks(conn: Connection, seq: int) -> None:
    """Tell the run's live tasks to stop (their agents see `cancel` in the next reply)."""
    conn.execute(
        "UPDATE tasks SET cancel = 1 WHERE run_seq = ?"
        " AND state IN ('Assigned', 'Starting', 'Running')",
        (seq,),
    )


def write_run_state(
    conn: Connection,
    seq: int,
    state: RunState,
    failure: tuple[str, str, int | None, str | None] | None,
    now: datetime,
) -> None:
    """The run's new state; `failure`, the task whose end is the reason a run Failed."""
    reason = failure_text(failure) if failure is not None else None
    conn.execute(
        "UPDATE runs SET state = ?, reason = ?, reason_kind = NULL, ended_at = ? WHERE seq = ?",
        (state.value, reason, now.isoformat() if state.ended else None, seq),
    )


def requeue(
    conn: Connection, seq: int, ended: str, now: datetime, *, preempted: bool = False
) -> None:
    """Place the run again from the start (inside the caller's transaction, once every worker
    of its attempt ended): the attempt is recorded with why it `ended` (the first failed
    worker's end, or its preemption), its tasks are retired to negative indexes (a Lost one
    keeps holding its GPUs until its agent reports the worker gone), one Pending task takes
    their place, and the run waits in the queue with its submission time and place kept, one
    attempt further. A `preempted` run waits `Preempted by a higher-priority run`, and its
    attempt uses up no retry (`preemptions` counts it)."""
    run = conn.execute(
        "SELECT name, spec, attempt, preemptions FROM runs WHERE seq = ?", (seq,)
    ).fetchone()
    name, attempt, preemptions = str(run[0]), int(run[2]), int(run[3]) + int(preempted)
    retries = int(json.loads(run[1]).get("retries", 0))
    reclaimed = False
    if preempted:  # the attempt says why, and for what priority (never which run)
        priority, why = conn.execute(
            "SELECT preempted_for_priority, preempted_reason FROM runs WHERE seq = ?", (seq,)
        ).fetchone()
        reclaimed = why == RECLAIMED
        ended = why or ended
        ended = f"{ended} (priority {priority})" if priority is not None else ended
    started, workers = conn.execute(
        f"SELECT min(started_at), count(*) FROM tasks WHERE run_seq = ? AND {CURRENT}",  # noqa: S608
        (seq,),
    ).fetchone()
    conn.execute(
        "INSERT INTO run_attempts (run_seq, number, started_at, ended_at, reason, workers)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (seq, attempt, started, now.isoformat(), ended, workers),
    )
    conn.execute(
        "UPDATE tasks SET idx = -(? * ? + idx) - 1 WHERE run_seq = ? AND idx >= 0",
        (attempt, RETIRED_STRIDE, seq),
    )
    if reclaimed:
        reason, kind = RECLAIMED, ReasonKind.RECLAIMED.value
    elif preempted:
        reason, kind = PREEMPTED, ReasonKind.PREEMPTED.value
    else:  # the attempt among those its retries allow
        reason = requeued_after_fault(attempt + 1 - preemptions, retries + 1)
        kind = ReasonKind.REQUEUED.value
    conn.execute(
        "INSERT INTO tasks (run_seq, idx, name, state, uid, reason, reason_kind)"
        " VALUES (?, 0, ?, 'Pending', ?, ?, ?)",
        (seq, task_name(name, 0), new_task_uid(), reason, kind),
    )
    conn.execute(
        "UPDATE runs SET state = 'Pending', attempt = ?, reason = ?, reason_kind = ?,"
        " shape = NULL, landing = NULL, network = NULL, nvlink_domain = NULL, ended_at = NULL,"
        " preempting = 0, preemptions = ? WHERE seq = ?",
        (attempt + 1, reason, kind, preemptions, seq),
    )


def failure_text(task: sqlite3.Row | tuple[str, str, int | None, str | None]) -> str:
    """`finetune-1 Lost: machine gpu-02 stopped reporting at …`; `finetune-0 Failed (exit 3)`."""
    name, state, exit_code, message = task[0], task[1], task[2], task[3]
    text = f"{name} {state}"
    if exit_code is not None:
        text += f" (exit {exit_code})"
    return f"{text}: {message}" if message else text
