"""What the scheduler reads for a pass: the queue in order, and what live tasks hold."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from astraeus.shared import RequestedResources

from .db import Database
from .rows import when


@dataclass(frozen=True)
class QueueItem:
    """One placement to make: a whole run, or one element of an array run."""

    seq: int
    workspace: str
    run: str
    index: int
    """The array element, or 0 for a run placed whole."""
    is_array: bool
    priority: int
    ask: RequestedResources
    image: str | None
    time_limit_seconds: int | None
    first_evaluated_at: datetime | None
    submitted_at: datetime | None = None

    @property
    def key(self) -> tuple[str, str]:
        """The run's identity in the cluster (the placement engine's `RunKey`)."""
        return (self.workspace, self.run)

    @property
    def label(self) -> str:
        """How other runs' reasons name it."""
        return f"{self.run}-{self.index}" if self.is_array else self.run


@dataclass
class Usage:
    """What live tasks hold on one machine."""

    gpu_ids: set[str] = field(default_factory=set)
    cpu_cores: float = 0.0
    memory_bytes: int = 0
    runs: set[tuple[str, str]] = field(default_factory=set)
    """(workspace, run) of each run with a live task here."""


Parsed = tuple[RequestedResources, dict[str, object]]


def read_queue(database: Database, cache: dict[int, Parsed] | None = None) -> list[QueueItem]:
    """Pending tasks in queue order: priority (highest first), then submission, then index.

    `cache` keeps parsed asks between passes (a run's spec never changes once stored)."""
    rows = database.read(
        "SELECT runs.seq, runs.workspace, runs.name, runs.spec, runs.priority,"
        " runs.first_evaluated_at, runs.submitted_at, tasks.idx"
        " FROM tasks JOIN runs ON runs.seq = tasks.run_seq"
        " WHERE tasks.state = 'Pending' AND runs.state IN ('Pending', 'Running')"
        " ORDER BY runs.priority DESC, runs.seq, tasks.idx"
    )
    parsed: dict[int, Parsed] = {} if cache is None else cache
    seen: set[int] = set()
    items: list[QueueItem] = []
    for row in rows:
        if row["seq"] not in parsed:
            spec = json.loads(row["spec"])
            ask = RequestedResources.model_validate(spec["requested_resources"])
            parsed[row["seq"]] = (ask, spec)
        ask, spec = parsed[row["seq"]]
        seen.add(row["seq"])
        items.append(
            QueueItem(
                seq=row["seq"],
                workspace=row["workspace"],
                run=row["name"],
                index=row["idx"],
                is_array=ask.array is not None,
                priority=row["priority"],
                ask=ask,
                image=spec.get("image"),  # type: ignore[arg-type]
                time_limit_seconds=spec.get("time_limit_seconds"),  # type: ignore[arg-type]
                first_evaluated_at=when(row["first_evaluated_at"]),
                submitted_at=when(row["submitted_at"]),
            )
        )
    for gone in set(parsed) - seen:
        del parsed[gone]
    return items


def read_usage(database: Database) -> dict[str, Usage]:
    """Per machine: GPUs, cores and memory held by live tasks (and Lost ones still held), and
    the runs they belong to."""
    usage: dict[str, Usage] = defaultdict(Usage)
    rows = database.read(
        "SELECT tasks.machine, tasks.gpu_ids, tasks.cpu_cores, tasks.memory_bytes, runs.name,"
        " runs.workspace"
        " FROM tasks JOIN runs ON runs.seq = tasks.run_seq"
        " WHERE tasks.state IN ('Assigned', 'Starting', 'Running') OR tasks.held = 1"
    )
    for row in rows:
        held = usage[row["machine"]]
        held.gpu_ids.update(json.loads(row["gpu_ids"]))
        held.cpu_cores += row["cpu_cores"]
        held.memory_bytes += row["memory_bytes"]
        held.runs.add((row["workspace"], row["name"]))
    return dict(usage)


def gpus_by_workspace(database: Database) -> dict[str, int]:
    """GPUs held by live tasks, per workspace: what counts against a quota."""
    rows = database.read(
        "SELECT runs.workspace, count(*) AS n FROM gpu_holds"
        " JOIN tasks ON tasks.id = gpu_holds.task_id JOIN runs ON runs.seq = tasks.run_seq"
        " GROUP BY runs.workspace"
    )
    return {row["workspace"]: row["n"] for row in rows}


def live_by_run(database: Database) -> dict[int, int]:
    """Live tasks per run: what an array's concurrency limit counts."""
    rows = database.read(
        "SELECT run_seq, count(*) AS n FROM tasks WHERE state IN ('Assigned', 'Starting',"
        " 'Running') GROUP BY run_seq"
    )
    return {row["run_seq"]: row["n"] for row in rows}
