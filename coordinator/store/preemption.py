"""Preemption's rows: the live runs a pass may stop (plain rows), the preemptions of the last
minute (the rate limit), and a preemption written (victims told to stop with the grace the
coordinator chose). Which runs are stopped is the scheduler's decision
(`scheduler/preemption.py`); how a stopped run goes back to the queue is `runs.requeue`'s,
applied by the report service once its workers are gone."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

from astraeus.shared.reasons import PREEMPTED, RECLAIMED

from .db import Database
from .dialect import Connection
from .rows import when


@dataclass(frozen=True, slots=True)
class LiveTask:
    """One live task of a run: where it is and what it holds."""

    machine: str
    gpu_ids: tuple[str, ...]
    cpu_cores: float
    memory_bytes: int


@dataclass(frozen=True, slots=True)
class LiveRun:
    """A running run (not an array: its elements are not requeued whole) with what its live
    tasks hold: a run a pass may preempt, or one already stopping for a preemption
    (`leaving`)."""

    seq: int
    workspace: str
    name: str
    priority: int
    preemptible: bool
    leaving: bool
    preempted_for: int | None
    """While `leaving`: the row of the run it stops for."""
    started_at: datetime | None
    """When its first worker started; None while none has."""
    tasks: tuple[LiveTask, ...]

    @property
    def gpus(self) -> int:
        return sum(len(task.gpu_ids) for task in self.tasks)


def read_live_runs(database: Database) -> list[LiveRun]:
    """Every running run that is not an array, with its live tasks, in run order."""
    array = database.json_text("runs.spec", "requested_resources.array")
    preemptible = database.json_text("runs.spec", "preemptible")
    # The two parts of the spec this reads, picked out by the database: decoding every live
    # run's whole spec in Python each pass halved a deep queue's throughput.
    rows = database.tuples(
        "SELECT runs.seq, runs.workspace, runs.name, runs.priority,"  # noqa: S608 - our own text
        f" {array} IS NOT NULL, {preemptible}, runs.preempting, runs.preempted_for,"
        " tasks.machine, tasks.gpu_ids, tasks.cpu_cores, tasks.memory_bytes, tasks.started_at"
        " FROM tasks JOIN runs ON runs.seq = tasks.run_seq"
        " WHERE runs.state = 'Running' AND tasks.idx >= 0"
        " AND tasks.state IN ('Assigned', 'Starting', 'Running')"
        " ORDER BY runs.seq, tasks.idx"
    )
    found: list[LiveRun] = []
    current: list[object] | None = None
    tasks: list[LiveTask] = []
    starts: list[datetime] = []

    def close() -> None:
        if current is None:
            return
        seq, workspace, name, priority, is_array, stoppable, preempting, preempted_for = current
        if is_array:
            return
        found.append(
            LiveRun(
                seq=int(str(seq)),
                workspace=str(workspace),
                name=str(name),
                priority=int(str(priority)),
                preemptible=stoppable not in (0, "0", "false", False),
                leaving=bool(preempting),
                preempted_for=int(str(preempted_for)) if preempting and preempted_for else None,
                started_at=min(starts) if starts else None,
                tasks=tuple(tasks),
            )
        )

    for seq, workspace, name, priority, is_array, stoppable, preempting, leaving_for, *task in rows:
        if current is None or current[0] != seq:
            close()
            current = [seq, workspace, name, priority, is_array, stoppable, preempting, leaving_for]
            tasks, starts = [], []
        machine, gpu_ids, cores, memory, started = task
        tasks.append(LiveTask(machine, tuple(json.loads(gpu_ids)), float(cores), int(memory)))
        start = when(started)
        if start is not None:
            starts.append(start)
    close()
    return found


RATE_WINDOW = timedelta(minutes=1)
"""What `preemption_max_per_minute` counts over."""


def recent_preemptions(database: Database, now: datetime) -> int:
    """Preemptions written in the minute before `now` (the cluster-wide rate limit)."""
    row = database.read_one(
        "SELECT count(*) AS n FROM preemptions WHERE at > ?", ((now - RATE_WINDOW).isoformat(),)
    )
    return int(row["n"]) if row else 0


def preemption_totals(database: Database) -> tuple[int, int]:
    """Preemptions so far, and the runs they stopped (`/metrics`)."""
    row = database.read_one(
        "SELECT count(*) AS n, coalesce(sum(victims), 0) AS victims FROM preemptions"
    )
    return (int(row["n"]), int(row["victims"])) if row else (0, 0)


class PreemptionRow(NamedTuple):
    """A pass's decision to stop `victims` (run rows) for a run of `priority`, holding `gpus`
    GPUs between them; those in `reclaimed` are stopped because their workspace is over its
    guarantee and the run's is below its own (the others: their priority is lower)."""

    victims: tuple[int, ...]
    priority: int
    gpus: int
    reclaimed: tuple[int, ...] = ()
    preemptor: int | None = None
    """The row of the run they stop for."""


def commit_preemptions(
    database: Database, preemptions: Sequence[PreemptionRow], grace: float, now: datetime
) -> int:
    """Write each preemption in one transaction: its victims still running are told to stop
    (their agents see `cancel`, with `grace` seconds between SIGTERM and SIGKILL) and marked
    preempting, until their workers are
    gone (`runs.requeue`). Returns how many runs were told to stop. A victim that ended or was
    preempted meanwhile is skipped: a pass never decides on rows it did not read."""
    if not preemptions:
        return 0
    stopped = 0
    with database.write() as conn:
        for preemption in preemptions:
            stopped += _preempt(conn, preemption, grace, now)
    return stopped


def _preempt(conn: Connection, preemption: PreemptionRow, grace: float, now: datetime) -> int:
    stopped = 0
    for seq in preemption.victims:
        reclaimed = seq in preemption.reclaimed
        cursor = conn.execute(
            "UPDATE runs SET preempting = 1, preempted_at = ?, preempted_for_priority = ?,"
            " preempted_reason = ?, preempted_for = ?"
            " WHERE seq = ? AND state = 'Running' AND preempting = 0",
            (
                now.isoformat(),
                None if reclaimed else preemption.priority,
                RECLAIMED if reclaimed else PREEMPTED,
                preemption.preemptor,
                seq,
            ),
        )
        if cursor.rowcount:
            stopped += 1
            conn.execute(
                "UPDATE tasks SET cancel = 1, stop_grace = ? WHERE run_seq = ? AND idx >= 0"
                " AND state IN ('Assigned', 'Starting', 'Running')",
                (grace, seq),
            )
    if stopped:
        conn.execute(
            "INSERT INTO preemptions (at, priority, victims, gpus) VALUES (?, ?, ?, ?)",
            (now.isoformat(), preemption.priority, stopped, preemption.gpus),
        )
    return stopped


def leaving_runs(database: Database) -> tuple[int, ...]:
    """The runs told to stop and not yet back in the queue (`preempting`), in run order: what
    a pass's decisions depend on of the live runs when no run needs a victim."""
    rows = database.tuples("SELECT seq FROM runs WHERE preempting = 1 ORDER BY seq")
    return tuple(int(str(seq)) for (seq,) in rows)
