"""Rows of `runs` and `tasks` turned into the shared `Run` and `Task` models."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

from pydantic import TypeAdapter

from astraeus.shared import (
    Attempt,
    Landing,
    PendingExplanation,
    RequestedResources,
    Run,
    RunState,
    Shape,
    Task,
    TaskState,
)
from astraeus.shared.explanation import RejectionGroup
from astraeus.shared.reasons import ReasonKind

from .db import Row

GROUPS: TypeAdapter[list[RejectionGroup]] = TypeAdapter(list[RejectionGroup])

RUN_FIELDS = (
    "image",
    "command",
    "env",
    "priority",
    "time_limit_seconds",
    "requested_resources",
    "retries",
    "retry_on_failure",
    "preemptible",
)
"""The parts of a `RunSpec` kept in `runs.spec` (name and workspace have their own columns)."""


def new_task_uid() -> str:
    """A fresh task identity (`shared.assignment.TaskUid`), for every row and every placement."""
    return str(uuid.uuid4())


def when(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def task_from_row(row: Row) -> Task:
    return Task(
        name=row["name"],
        run=row["run_name"],
        index=row["idx"],
        state=TaskState(row["state"]),
        machine=row["machine"],
        assigned_gpu_ids=json.loads(row["gpu_ids"]),
        cpu_cores=row["cpu_cores"],
        memory_bytes=row["memory_bytes"],
        reason=row["reason"],
        reason_kind=waiting_kind(row, TaskState(row["state"]) == TaskState.PENDING),
        placement=(
            PendingExplanation.model_validate_json(row["placement"]) if row["placement"] else None
        ),
        rejections=_groups(row["rejections"]),
        exit_code=row["exit_code"],
        message=row["message"],
        started_at=when(row["started_at"]),
        ended_at=when(row["ended_at"]),
    )


def _groups(stored: str | None) -> list[RejectionGroup] | None:
    return GROUPS.validate_json(stored) if stored else None


def waiting_kind(row: Row, waiting: bool) -> ReasonKind | None:
    """The kind of a waiting row's reason (`NotEvaluated` before its first explanation); none
    once it no longer waits."""
    if not waiting:
        return None
    return ReasonKind(row["reason_kind"] or ReasonKind.NOT_EVALUATED)


def run_from_row(row: Row, tasks: list[Task], earlier: list[Attempt] | None = None) -> Run:
    """The run of `row` with its (current attempt's) `tasks`; `earlier`, its attempts that
    ended before this one (`run_attempts`)."""
    spec: dict[str, Any] = json.loads(row["spec"])
    ask = RequestedResources.model_validate(spec["requested_resources"])
    shape = Shape.model_validate_json(row["shape"]) if row["shape"] else None
    landing = Landing.model_validate_json(row["landing"]) if row["landing"] else None
    if ask.array is not None and shape is not None and landing is not None:
        shape, landing = _each_element(shape, landing, tasks)
    return Run(
        name=row["name"],
        uid=row["uid"],
        workspace=row["workspace"],
        image=spec.get("image"),
        command=spec["command"],
        env=spec.get("env", {}),
        priority=row["priority"],
        time_limit_seconds=spec.get("time_limit_seconds"),
        requested_resources=ask,
        retries=spec.get("retries", 0),
        retry_on_failure=spec.get("retry_on_failure", False),
        preemptible=spec.get("preemptible", True),
        preempted_at=when(row["preempted_at"]),
        preempted_for_priority=row["preempted_for_priority"],
        preempted_reason=row["preempted_reason"],
        preemptions=row["preemptions"],
        attempt=row["attempt"],
        attempts=[*(earlier or []), _current_attempt(row, tasks)],
        state=RunState(row["state"]),
        reason=row["reason"],
        reason_kind=waiting_kind(row, RunState(row["state"]) == RunState.PENDING),
        shape=shape,
        landing=landing,
        tasks=tasks,
        submitted_at=datetime.fromisoformat(row["submitted_at"]),
        first_evaluated_at=when(row["first_evaluated_at"]),
    )


def _current_attempt(row: Row, tasks: list[Task]) -> Attempt:
    """The attempt now: started when its first worker did; ended with the run, with the run's
    reason when it failed."""
    started = [task.started_at for task in tasks if task.started_at is not None]
    state = RunState(row["state"])
    return Attempt(
        number=row["attempt"],
        started_at=min(started) if started else None,
        ended_at=when(row["ended_at"]) if state.ended else None,
        reason=row["reason"] if state in (RunState.FAILED, RunState.CANCELLED) else None,
        workers=len(tasks),
    )


def attempt_from_row(row: Row) -> Attempt:
    return Attempt(
        number=row["number"],
        started_at=when(row["started_at"]),
        ended_at=when(row["ended_at"]),
        reason=row["reason"],
        workers=row["workers"],
    )


ELEMENT_WHERE = "one machine per element"


def _each_element(shape: Shape, landing: Landing, tasks: list[Task]) -> tuple[Shape, Landing]:
    """An array's shape and landing describe every element, not the last one placed: one worker
    each, and the machine of each placed element in element order (its task names it too)."""
    each = shape.gpus_each
    why = "1 worker per element" + (f" × {each} GPU{'s' if each != 1 else ''}" if each else "")
    machines = [task.machine for task in tasks if task.machine is not None]
    return (
        Shape(tasks=1, gpus_each=each, why=why),
        Landing(rung=landing.rung, where=ELEMENT_WHERE, machines=machines),
    )


TASK_SELECT = (
    "SELECT tasks.*, runs.name AS run_name, explanations.body AS placement,"
    " explanations.rejections AS rejections FROM tasks"
    " JOIN runs ON runs.seq = tasks.run_seq"
    " LEFT JOIN explanations ON explanations.id = tasks.explanation_id"
)
