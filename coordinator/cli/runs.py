"""`run`, `status`, `list`, `logs`, `cancel`."""

from __future__ import annotations

import argparse
import time
import urllib.parse

from astraeus.coordinator.api.cluster import ClusterView
from astraeus.coordinator.api.views import DryRun, LogView, RunList
from astraeus.shared import Run, RunSpec, Task

from .client import Api
from .context import Context
from .errors import CliError, Exit
from .render import (
    explained_task,
    grouped_why_lines,
    run_rows,
    status_lines,
    table,
    why_lines,
)
from .spec import build_spec

GIB = 1024**3
FOLLOW_SECONDS = 1.0


def run(ctx: Context, args: argparse.Namespace) -> int:
    spec = build_spec(args, ctx.api.target.workspace)
    body = spec.model_dump(mode="json", exclude_unset=True)
    if args.dry_run:
        # Grouped by reason unless JSON is asked: the answer's size does not grow with the cluster.
        grouping = {} if ctx.json else {"explain": "grouped"}
        dry = DryRun.model_validate(ctx.api.post("/runs", body, dry_run="true", **grouping))
        ctx.emit(dry, dry_run_lines(spec, dry))
        return Exit.OK
    submitted = Run.model_validate(ctx.api.post("/runs", body))
    ctx.emit(submitted, [submitted_line(ctx.api, submitted.name)])
    return Exit.OK


def submitted_line(api: Api, name: str) -> str:
    """`<name> submitted to <cluster>: <the run's page in the console>`, as in the guide."""
    cluster = ClusterView.model_validate(api.get("/cluster"))
    url = f"{cluster.console_url}#/runs/{urllib.parse.quote(name)}"
    return f"{name} submitted to {cluster.name}: {url}"


def dry_run_lines(spec: RunSpec, dry: DryRun) -> list[str]:
    if not dry.would_start:
        lines = [f"{spec.name} would wait — {dry.reason}"]
        if dry.placement_grouped is not None:
            return lines + grouped_why_lines(dry.placement_grouped, dry.reason_kind)
        return lines + (
            why_lines(dry.placement, dry.reason_kind, dry.rejections) if dry.placement else []
        )
    why = dry.shape.why if dry.shape else "now"
    rows = [
        [
            f"{spec.name}-{w.index}",
            w.machine,
            f"{len(w.assigned_gpu_ids)} GPUs",
            f"{w.cpu_cores:g} cores",
            f"{w.memory_bytes / GIB:g} GiB",
        ]
        for w in dry.workers
    ]
    return [f"{spec.name} would start now — {why}", *table(rows, indent="  ")]


def _get_run(ctx: Context, name: str, **query: str) -> Run:
    return Run.model_validate(ctx.api.get(f"/runs/{name}", **query))


def status(ctx: Context, args: argparse.Namespace) -> int:
    # `--why` reads the explanation grouped by reason (`-o json` prints the guide's, whole).
    grouping = {"explain": "grouped"} if args.why and not ctx.json else {}
    found = _get_run(ctx, args.name, **grouping)
    lines = status_lines(found)
    task = explained_task(found)
    kind = found.reason_kind or (task.reason_kind if task else None)
    if args.why and task is not None and task.placement_grouped is not None:
        lines += grouped_why_lines(task.placement_grouped, kind)
    elif args.why and task is not None and task.placement is not None:
        lines += why_lines(task.placement, kind, task.rejections)
    ctx.emit(found, lines)
    return Exit.OK


def list_runs(ctx: Context, args: argparse.Namespace) -> int:
    runs = RunList.model_validate(ctx.api.get("/runs", state=args.state))
    ctx.emit(runs, run_rows(runs.runs))
    return Exit.OK


def cancel(ctx: Context, args: argparse.Namespace) -> int:
    """Cancel a run; one that had already ended is left as it is, and says so (exit 0)."""
    before = _get_run(ctx, args.name)
    if before.state.ended:
        ctx.emit(before, [f"{before.name} had already finished: {before.state.value}"])
        return Exit.OK
    done = Run.model_validate(ctx.api.post(f"/runs/{args.name}/cancel"))
    ctx.emit(done, [f"{done.name}: {done.state.value}"])
    return Exit.OK


def logs(ctx: Context, args: argparse.Namespace) -> int:
    """A run's tasks' logs (each line prefixed by its task when there are several), or a task's."""
    tasks = _tasks_of(ctx, args.name)
    printed = dict.fromkeys(tasks, 0)
    views: list[LogView] = []
    while True:
        for task in tasks:
            view = LogView.model_validate(ctx.api.get(f"/tasks/{task}/logs"))
            views.append(view)
            if not ctx.json:
                printed[task] = _print_new(ctx, view, printed[task], len(tasks) > 1)
        if not args.follow or _ended(ctx, args.name):
            break
        time.sleep(FOLLOW_SECONDS)
    if ctx.json:
        ctx.emit([v.model_dump(mode="json") for v in views[-len(tasks) :]], [])
    return Exit.OK


def _tasks_of(ctx: Context, name: str) -> list[str]:
    """A run's tasks, or the one task of that name; neither: `no run named 'x'`."""
    try:
        return [task.name for task in _get_run(ctx, name).tasks]
    except CliError as exc:
        if exc.code != Exit.NOT_FOUND:
            raise
        missing = exc
    try:
        ctx.api.get(f"/tasks/{name}")
    except CliError as exc:
        raise missing if exc.code == Exit.NOT_FOUND else exc from None
    return [name]


def _ended(ctx: Context, name: str) -> bool:
    try:
        return _get_run(ctx, name).state.ended
    except CliError as exc:
        if exc.code != Exit.NOT_FOUND:
            raise
    return Task.model_validate(ctx.api.get(f"/tasks/{name}")).state.ended


def _print_new(ctx: Context, view: LogView, printed: int, prefix: bool) -> int:
    """Print what lies past byte `printed`; returns the new end."""
    data = view.data.encode()
    end = view.offset + len(data)
    fresh = data[max(0, printed - view.offset) :].decode(errors="replace")
    if fresh:
        text = fresh
        if prefix:
            text = "".join(f"{view.task}: {line}" for line in fresh.splitlines(keepends=True))
        ctx.out.write(text)
        ctx.out.flush()
    return max(printed, end)
