"""`status`, `list`, `cancel`, `delete`: a run as it stands (`run` is in `submit.py`, `logs` in
`logs.py`). Each reads the API's JSON as it comes (`render.Answer`), with no model: what they
show is the coordinator's, already validated there."""

from __future__ import annotations

from .client import segment
from .context import Context
from .errors import Exit
from .render import (
    ENDED_RUN_STATES,
    Answer,
    explained_task,
    grouped_why_lines,
    reason_kind,
    run_rows,
    status_lines,
    why_lines,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def get_run(ctx: Context, name: str, **query: str) -> Answer:
    found: Answer = ctx.api.get(f"/runs/{segment(name)}", **query)
    return found


def status(ctx: Context, args: argparse.Namespace) -> int:
    # `--why` reads the explanation grouped by reason (`-o json` prints the guide's, whole).
    grouping = {"explain": "grouped"} if args.why and not ctx.json else {}
    found = get_run(ctx, args.name, **grouping)
    lines = status_lines(found)
    task = explained_task(found)
    kind = reason_kind(found["reason_kind"] or (task["reason_kind"] if task else None))
    if args.why and task is not None and task["placement_grouped"] is not None:
        lines += grouped_why_lines(task["placement_grouped"], kind)
    elif args.why and task is not None and task["placement"] is not None:
        lines += why_lines(task["placement"], kind, task["rejections"])
    ctx.emit(found, lines)
    return Exit.OK


def list_runs(ctx: Context, args: argparse.Namespace) -> int:
    runs: Answer = ctx.api.get("/runs", state=args.state)
    ctx.emit(runs, run_rows(runs["runs"]))
    return Exit.OK


def cancel(ctx: Context, args: argparse.Namespace) -> int:
    """Cancel a run; one that had already ended is left as it is, and says so (exit 0)."""
    before = get_run(ctx, args.name)
    if before["state"] in ENDED_RUN_STATES:
        ctx.emit(before, [f"{before['name']} had already finished: {before['state']}"])
        return Exit.OK
    done: Answer = ctx.api.post(f"/runs/{segment(args.name)}/cancel")
    ctx.emit(done, [f"{done['name']}: {done['state']}"])
    return Exit.OK


def delete(ctx: Context, args: argparse.Namespace) -> int:
    """Delete a run that has ended; one not ended is refused with the advice to cancel it."""
    gone: Answer = ctx.api.delete(f"/runs/{segment(args.name)}")
    ctx.emit(gone, [f"{gone['name']} deleted ({gone['state']}): the name may be used again"])
    return Exit.OK
