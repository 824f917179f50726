"""Runs and tasks: submit (or dry-run), list, get, cancel; a task's placement and logs."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from aiohttp import web

from astraeus.coordinator.placement import Placement
from astraeus.coordinator.store import NameTakenError
from astraeus.coordinator.store.runs import RunLiveError
from astraeus.shared import MachineState, Run, RunSpec, RunState, Task
from astraeus.shared.run import MAX_RETRIES
from astraeus.shared.views import DryRun, LogView, RunList, WorkerView

from .auth import workspace_of
from .errors import fail, not_found, read_model
from .grouping import QUERY, group, group_run, wants_grouped
from .keys import CLOCK, RECORDS, SCHEDULER, STORE
from .routes import Route


def _json(model: Run | Task | RunList | DryRun | LogView, status: int = 200) -> web.Response:
    return web.Response(
        text=model.model_dump_json(), status=status, content_type="application/json"
    )


Silence = Callable[[str | None], datetime | None]
"""A machine's name to when it was last heard, while it is silent (Down); else None."""


def _silence(request: web.Request) -> Silence:
    """Silence is not death: a live task whose machine is Down is shown with when the machine
    was last heard (`machine_silent_since`) and keeps its state until `lost_after_seconds`."""
    app = request.app
    records, scheduler, now = app[RECORDS], app[SCHEDULER], app[CLOCK].now()
    found: dict[str, datetime | None] = {}

    def since(machine: str | None) -> datetime | None:
        if machine is None:
            return None
        if machine not in found:
            record = records.get(machine)
            down = record is not None and (
                record.state(now, scheduler.down_after, scheduler.heard_since) == MachineState.DOWN
            )
            found[machine] = record.last_seen if down and record is not None else None
        return found[machine]

    return since


def _task_silence(task: Task, since: Silence) -> Task:
    silent = since(task.machine) if task.state.holds_resources else None
    return task.model_copy(update={"machine_silent_since": silent}) if silent else task


def _run_silence(run: Run, since: Silence) -> Run:
    tasks = [_task_silence(task, since) for task in run.tasks]
    heard = [task.machine_silent_since for task in tasks if task.machine_silent_since]
    if not heard:
        return run
    return run.model_copy(update={"tasks": tasks, "machine_silent_since": min(heard)})


async def create_run(request: web.Request) -> web.Response:
    spec = await read_model(request, RunSpec)
    workspace = workspace_of(request, spec.workspace)
    store = request.app[STORE]
    limit = store.workspaces.get(workspace)
    if limit is not None and spec.priority > limit.max_priority:
        fail(
            400,
            "priority too high",
            "priority",
            f"at most {limit.max_priority} in workspace {workspace}, got {spec.priority}",
        )
    now = request.app[CLOCK].now()
    if request.query.get("dry_run", "").lower() in ("1", "true", "yes"):
        dry = await _dry_run(request, spec, workspace, grouping=wants_grouped(request))
        return _json(dry)
    try:
        run = await store.database.run(store.runs.submit, spec, workspace, now)
    except NameTakenError as taken:
        fail(
            409,
            f"a run named {spec.name!r} is {taken.state.value} in workspace {workspace}",
            "name",
            f"is already used in this workspace; by a run that is {taken.state.value}: cancel"
            " that run first (the name of a run that has ended may be used again), or pick"
            " another name",
        )
    request.app[SCHEDULER].poke(now=True)  # placed without waiting for the debounce
    return _json(run, status=201)


async def _dry_run(
    request: web.Request, spec: RunSpec, workspace: str, *, grouping: bool
) -> DryRun:
    """Where the run would go now; else why not, by reason when `grouping` (the per-machine
    explanation is then never made: at 20,000 machines it costs more than the decision)."""
    result = await request.app[SCHEDULER].dry_run(spec, workspace)
    if isinstance(result, Placement):
        workers = [
            WorkerView(
                index=w.index,
                machine=w.machine,
                assigned_gpu_ids=list(w.gpu_ids),
                cpu_cores=w.cpu_cores,
                memory_bytes=w.memory_bytes,
            )
            for w in result.workers
        ]
        return DryRun(would_start=True, shape=result.shape, landing=result.landing, workers=workers)
    dry = DryRun(would_start=False, reason=result.reason, reason_kind=result.kind)
    explained = result.explained
    if explained is None:
        return dry
    if grouping:
        return dry.model_copy(update={"placement_grouped": explained.grouped()})
    return dry.model_copy(update={"placement": explained.full(), "rejections": explained.groups()})


async def list_runs(request: web.Request) -> web.Response:
    raw_state = request.query.get("state")
    state = None
    if raw_state is not None:
        try:
            state = RunState(raw_state)
        except ValueError:
            fail(
                400,
                "unknown state",
                "state",
                f"{raw_state!r} is not allowed; use one of {', '.join(s.value for s in RunState)}",
            )
    raw_limit = request.query.get("limit", "1000")
    if not (raw_limit.isascii() and raw_limit.isdigit()) or not 1 <= int(raw_limit) <= 10_000:
        fail(
            400, "bad limit", "limit", f"must be a whole number from 1 to 10000, got {raw_limit!r}"
        )
    workspace = workspace_of(request, request.query.get("workspace"))
    runs = request.app[STORE].runs.find(workspace, state, int(raw_limit))
    since = _silence(request)
    return _json(RunList(runs=[_run_silence(run, since) for run in runs]))


async def get_run(request: web.Request) -> web.Response:
    workspace = workspace_of(request, request.query.get("workspace"))
    name = request.match_info["name"]
    grouping = wants_grouped(request)
    run = request.app[STORE].runs.get(workspace, name)
    if run is None:
        not_found("run", name)
    run = _run_silence(run, _silence(request))
    return _json(group_run(run) if grouping else run)


async def cancel_run(request: web.Request) -> web.Response:
    workspace = workspace_of(request, request.query.get("workspace"))
    name = request.match_info["name"]
    store = request.app[STORE]
    run = await store.database.run(store.runs.cancel, workspace, name, request.app[CLOCK].now())
    if run is None:
        not_found("run", name)
    request.app[SCHEDULER].poke()
    return _json(_run_silence(run, _silence(request)))


async def delete_run(request: web.Request) -> web.Response:
    """Remove an ended run from the workspace's runs: its name is free, its logs go (the rows
    its GPU-hours were counted by stay). A run not ended is refused: cancel it first."""
    workspace = workspace_of(request, request.query.get("workspace"))
    name = request.match_info["name"]
    store = request.app[STORE]
    now = request.app[CLOCK].now()
    try:
        run = await store.database.run(store.runs.delete, workspace, name, now)
    except RunLiveError as live:
        fail(
            409,
            f"run {name!r} is {live.state.value}: only a run that has ended can be deleted",
            "name",
            "has not ended; cancel that run first, then delete it",
        )
    if run is None:
        not_found("run", name)
    return _json(run)


async def get_task(request: web.Request) -> web.Response:
    workspace = workspace_of(request, request.query.get("workspace"))
    name = request.match_info["task"]
    grouping = wants_grouped(request)
    task = request.app[STORE].runs.task(workspace, name)
    if task is None:
        not_found("task", name)
    task = _task_silence(task, _silence(request))
    return _json(group(task) if grouping else task)


async def task_logs(request: web.Request) -> web.Response:
    workspace = workspace_of(request, request.query.get("workspace"))
    name = request.match_info["task"]
    attempt = _attempt(request.query.get("attempt"))
    logs = request.app[STORE].runs.logs(workspace, name, attempt)
    if logs is None:
        not_found("task", name if attempt is None else f"{name} of attempt {attempt}")
    offset, data = logs
    return _json(LogView(task=name, offset=offset, data=data))


def _attempt(raw: str | None) -> int | None:
    """`?attempt=N`: which attempt of the run the task's log is of (none: the one now)."""
    if raw is None:
        return None
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= MAX_RETRIES + 1:
        fail(
            400,
            "bad attempt",
            "attempt",
            f"must be a whole number from 1 to {MAX_RETRIES + 1}, got {raw[:20]!r}",
        )
    return int(raw)


_WS = {"workspace": "the workspace (admins must name it; members act in their own)"}

ROUTES = (
    Route(
        "POST",
        "/api/v1/runs",
        create_run,
        "Submit a run (201), or dry-run it",
        "member",
        body=RunSpec,
        response=Run,
        status=201,
        errors={409: "the name is used by a run of the workspace that has not ended"},
        query={"dry_run": "true: store nothing, answer where it would go now (a DryRun)", **QUERY},
    ),
    Route(
        "GET",
        "/api/v1/runs",
        list_runs,
        "List runs",
        "member",
        response=RunList,
        query={**_WS, "state": "only runs in this state"},
    ),
    Route(
        "GET",
        "/api/v1/runs/{name}",
        get_run,
        "A run with its tasks, shape and landing",
        "member",
        response=Run,
        query={**_WS, **QUERY},
    ),
    Route(
        "POST",
        "/api/v1/runs/{name}/cancel",
        cancel_run,
        "Cancel a run",
        "member",
        response=Run,
        query=_WS,
    ),
    Route(
        "DELETE",
        "/api/v1/runs/{name}",
        delete_run,
        "Delete a run that has ended: its name may be used again, its logs go",
        "member",
        response=Run,
        query=_WS,
        errors={409: "the run has not ended: cancel it first"},
    ),
    Route(
        "GET",
        "/api/v1/tasks/{task}",
        get_task,
        "A task, with .placement while it waits",
        "member",
        response=Task,
        query={**_WS, **QUERY},
    ),
    Route(
        "GET",
        "/api/v1/tasks/{task}/logs",
        task_logs,
        "The task's kept log",
        "member",
        response=LogView,
        query={
            **_WS,
            "attempt": "the run's attempt the log is of (`attempts[].number`; default: the one"
            " now): an earlier attempt's log is kept after a requeue",
        },
    ),
)
