"""What the scheduler reads for a pass: the queue in order (plain rows), and what live tasks
hold."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from .db import Database
from .rows import when


@dataclass(frozen=True, slots=True)
class QueueRow:
    """One pending task as stored: its run and array index (0 for a run placed whole), the
    run's priority, spec (JSON; from `read_queue`, only the parts a placement reads) and times
    (`submitted_at`: from `read_queue`, when it began to wait, `WAITING_SINCE`). The scheduler
    makes it a `QueueItem`."""

    seq: int
    workspace: str
    run: str
    index: int
    priority: int
    spec: str
    first_evaluated_at: datetime | None
    submitted_at: datetime | None


@dataclass
class Usage:
    """What live tasks hold on one machine."""

    gpu_ids: set[str] = field(default_factory=set)
    cpu_cores: float = 0.0
    memory_bytes: int = 0
    runs: set[tuple[str, str]] = field(default_factory=set)
    """(workspace, run) of each run with a live task here."""
    limit_ends: datetime | None = None
    """When the last started task here reaches its time limit (its start plus the limit)."""
    unstarted_limit: int = 0
    """The longest time limit of a task here whose worker has not started yet (seconds)."""
    endless: bool = False
    """A task here has no time limit, or is a Lost one still held: when its GPUs free up is
    not known (`frees_at`)."""

    def frees_at(self, now: datetime) -> datetime | None:
        """When every task here has reached its time limit (an unstarted one counted from
        `now`); None when that is not known."""
        if self.endless:
            return None
        ends = [now + timedelta(seconds=self.unstarted_limit)]
        if self.limit_ends is not None:
            ends.append(self.limit_ends)
        return max(ends)


PLACED_BY = ("requested_resources", "image", "time_limit_seconds")
"""The parts of a run's spec a placement reads, cut out by the database: decoding every queued
run's whole spec in Python took 0.4 s of a pass's first read at 10,000 queued."""


WAITING_SINCE = (
    "CASE WHEN runs.attempt > 1 THEN (SELECT max(ended_at) FROM run_attempts"
    " WHERE run_attempts.run_seq = runs.seq) ELSE runs.submitted_at END"
)
"""When the run began to wait for this placement: its submission, or its requeue after a fault
(the placement latency metric counts from there; queue order keeps the submission's place)."""


def read_queue(database: Database) -> list[QueueRow]:
    """Pending tasks in queue order: priority (highest first), then submission, then index."""
    placed_by = database.json_pick("runs.spec", PLACED_BY)
    rows = database.tuples(
        f"SELECT runs.seq, runs.workspace, runs.name, tasks.idx, runs.priority, {placed_by},"  # noqa: S608 - our own text
        f" runs.first_evaluated_at, {WAITING_SINCE}"
        " FROM tasks JOIN runs ON runs.seq = tasks.run_seq"
        " WHERE tasks.state = 'Pending' AND runs.state IN ('Pending', 'Running')"
        " ORDER BY runs.priority DESC, runs.seq, tasks.idx"
    )
    return [
        QueueRow(seq, workspace, run, index, priority, spec, when(first), when(submitted))
        for seq, workspace, run, index, priority, spec, first, submitted in rows
    ]


def read_usage(database: Database) -> dict[str, Usage]:
    """Per machine: GPUs, cores and memory held by live tasks (and Lost ones still held), and
    the runs they belong to."""
    usage: dict[str, Usage] = defaultdict(Usage)
    limit = database.json_text("runs.spec", "time_limit_seconds")
    rows = database.read(
        "SELECT tasks.machine, tasks.gpu_ids, tasks.cpu_cores, tasks.memory_bytes, runs.name,"  # noqa: S608 - our own text
        f" runs.workspace, tasks.state, tasks.started_at, {limit} AS time_limit"
        " FROM tasks JOIN runs ON runs.seq = tasks.run_seq"
        " WHERE tasks.state IN ('Assigned', 'Starting', 'Running') OR tasks.held = 1"
    )
    for row in rows:
        held = usage[row["machine"]]
        held.gpu_ids.update(json.loads(row["gpu_ids"]))
        held.cpu_cores += row["cpu_cores"]
        held.memory_bytes += row["memory_bytes"]
        held.runs.add((row["workspace"], row["name"]))
        _count_limit(held, row["state"], when(row["started_at"]), row["time_limit"])
    return dict(usage)


def _count_limit(
    held: Usage, state: str, started: datetime | None, limit: str | int | None
) -> None:
    """Fold one task's time limit into its machine's: a Lost task still held, or one without
    a limit, makes the machine's end unknown."""
    if limit is None or state not in ("Assigned", "Starting", "Running"):
        held.endless = True
        return
    seconds = int(limit)
    if started is None:
        held.unstarted_limit = max(held.unstarted_limit, seconds)
        return
    end = started + timedelta(seconds=seconds)
    held.limit_ends = end if held.limit_ends is None else max(held.limit_ends, end)


@dataclass(frozen=True, order=True)
class WorkspaceUse:
    """What a workspace's live tasks (and Lost ones still held) hold: what counts against its
    quotas (`gpu_quota`, `cpu_quota`, `memory_quota`)."""

    gpus: int = 0
    cpu_cores: float = 0.0
    memory_bytes: int = 0

    def plus(self, gpus: int, cpu_cores: float, memory_bytes: int) -> WorkspaceUse:
        return WorkspaceUse(
            self.gpus + gpus, self.cpu_cores + cpu_cores, self.memory_bytes + memory_bytes
        )


def use_by_workspace(database: Database) -> dict[str, WorkspaceUse]:
    """GPUs, cores and memory held by live tasks, per workspace: what counts against quotas."""
    gpus = {
        row["workspace"]: row["n"]
        for row in database.read(
            "SELECT runs.workspace, count(*) AS n FROM gpu_holds"
            " JOIN tasks ON tasks.id = gpu_holds.task_id JOIN runs ON runs.seq = tasks.run_seq"
            " GROUP BY runs.workspace"
        )
    }
    rows = database.read(
        "SELECT runs.workspace, coalesce(sum(tasks.cpu_cores), 0) AS cores,"
        " coalesce(sum(tasks.memory_bytes), 0) AS memory"
        " FROM tasks JOIN runs ON runs.seq = tasks.run_seq"
        " WHERE tasks.state IN ('Assigned', 'Starting', 'Running') OR tasks.held = 1"
        " GROUP BY runs.workspace"
    )
    use = {
        row["workspace"]: WorkspaceUse(
            gpus.get(row["workspace"], 0), float(row["cores"]), int(row["memory"])
        )
        for row in rows
    }
    for workspace, count in gpus.items():
        use.setdefault(workspace, WorkspaceUse(gpus=count))
    return use


def live_by_run(database: Database) -> dict[int, int]:
    """Live tasks per run: what an array's concurrency limit counts."""
    rows = database.read(
        "SELECT run_seq, count(*) AS n FROM tasks WHERE state IN ('Assigned', 'Starting',"
        " 'Running') GROUP BY run_seq"
    )
    return {row["run_seq"]: row["n"] for row in rows}
