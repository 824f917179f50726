"""`logs`: a run's tasks' output, or one task's, once or following it (the API's JSON as it
comes: `LogView`'s `task`, `offset` and `data`)."""

from __future__ import annotations

import time

from .client import segment
from .context import Context
from .errors import CliError, Exit
from .render import ENDED_RUN_STATES, ENDED_TASK_STATES, Answer
from .runs import get_run

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

FOLLOW_SECONDS = 1.0


def logs(ctx: Context, args: argparse.Namespace) -> int:
    """A run's tasks' logs (each line prefixed by its task when there are several), or a task's."""
    tasks = _tasks_of(ctx, args.name, args.attempt)
    which = {} if args.attempt is None else {"attempt": str(args.attempt)}
    printed = dict.fromkeys(tasks, 0)
    views: list[Answer] = []
    while True:
        for task in tasks:
            view: Answer = ctx.api.get(f"/tasks/{segment(task)}/logs", **which)
            views.append(view)
            if not ctx.json:
                printed[task] = _print_new(ctx, view, printed[task], len(tasks) > 1)
        if not args.follow or _ended(ctx, args.name):
            break
        time.sleep(FOLLOW_SECONDS)
    if ctx.json:
        ctx.emit(views[-len(tasks) :], [])
    return Exit.OK


def _tasks_of(ctx: Context, name: str, attempt: int | None = None) -> list[str]:
    """A run's tasks (of its attempt `attempt`, else the one now), or the one task of that
    name; neither: `no run named 'x'`."""
    try:
        run = get_run(ctx, name)
        if attempt is None:
            return [task["name"] for task in run["tasks"]]
        return _attempt_tasks(run, attempt)
    except CliError as exc:
        if exc.code != Exit.NOT_FOUND:
            raise
        missing = exc
    try:
        ctx.api.get(f"/tasks/{segment(name)}")
    except CliError as exc:
        raise missing if exc.code == Exit.NOT_FOUND else exc from None
    return [name]


def _attempt_tasks(run: Answer, attempt: int) -> list[str]:
    """`<run>-0` … of attempt `attempt` (`shared.task_name`'s names)."""
    for found in run["attempts"]:
        if found["number"] == attempt:
            return [f"{run['name']}-{index}" for index in range(found["workers"])]
    numbers = ", ".join(str(found["number"]) for found in run["attempts"])
    raise CliError(
        f"--attempt: run {run['name']} has attempts {numbers}, not {attempt}", Exit.USAGE
    )


def _ended(ctx: Context, name: str) -> bool:
    try:
        return get_run(ctx, name)["state"] in ENDED_RUN_STATES
    except CliError as exc:
        if exc.code != Exit.NOT_FOUND:
            raise
    task: Answer = ctx.api.get(f"/tasks/{segment(name)}")
    return task["state"] in ENDED_TASK_STATES


def _print_new(ctx: Context, view: Answer, printed: int, prefix: bool) -> int:
    """Print what lies past byte `printed`; returns the new end."""
    data = view["data"].encode()
    offset: int = view["offset"]
    end = offset + len(data)
    fresh = data[max(0, printed - offset) :].decode(errors="replace")
    if fresh:
        text = fresh
        if prefix:
            text = "".join(f"{view['task']}: {line}" for line in fresh.splitlines(keepends=True))
        ctx.out.write(text)
        ctx.out.flush()
    return max(printed, end)
