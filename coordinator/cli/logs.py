"""`logs`: a run's tasks' output, or one task's, once or following it."""

from __future__ import annotations

import argparse
import time

from astraeus.shared import Run, Task, task_name
from astraeus.shared.views import LogView

from .context import Context
from .errors import CliError, Exit
from .runs import get_run

FOLLOW_SECONDS = 1.0


def logs(ctx: Context, args: argparse.Namespace) -> int:
    """A run's tasks' logs (each line prefixed by its task when there are several), or a task's."""
    tasks = _tasks_of(ctx, args.name, args.attempt)
    which = {} if args.attempt is None else {"attempt": str(args.attempt)}
    printed = dict.fromkeys(tasks, 0)
    views: list[LogView] = []
    while True:
        for task in tasks:
            view = LogView.model_validate(ctx.api.get(f"/tasks/{task}/logs", **which))
            views.append(view)
            if not ctx.json:
                printed[task] = _print_new(ctx, view, printed[task], len(tasks) > 1)
        if not args.follow or _ended(ctx, args.name):
            break
        time.sleep(FOLLOW_SECONDS)
    if ctx.json:
        ctx.emit([v.model_dump(mode="json") for v in views[-len(tasks) :]], [])
    return Exit.OK


def _tasks_of(ctx: Context, name: str, attempt: int | None = None) -> list[str]:
    """A run's tasks (of its attempt `attempt`, else the one now), or the one task of that
    name; neither: `no run named 'x'`."""
    try:
        run = get_run(ctx, name)
        if attempt is None:
            return [task.name for task in run.tasks]
        return _attempt_tasks(run, attempt)
    except CliError as exc:
        if exc.code != Exit.NOT_FOUND:
            raise
        missing = exc
    try:
        ctx.api.get(f"/tasks/{name}")
    except CliError as exc:
        raise missing if exc.code == Exit.NOT_FOUND else exc from None
    return [name]


def _attempt_tasks(run: Run, attempt: int) -> list[str]:
    for found in run.attempts:
        if found.number == attempt:
            return [task_name(run.name, index) for index in range(found.workers)]
    numbers = ", ".join(str(found.number) for found in run.attempts)
    raise CliError(f"--attempt: run {run.name} has attempts {numbers}, not {attempt}", Exit.USAGE)


def _ended(ctx: Context, name: str) -> bool:
    try:
        return get_run(ctx, name).state.ended
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
