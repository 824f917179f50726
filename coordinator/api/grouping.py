"""`explain=grouped`: a waiting task's explanation grouped by reason instead of per machine.

The guide's per-machine JSON stays the default answer of `GET /tasks/{task}`; with
`?explain=grouped`, `placement` and `rejections` give way to `placement_grouped` (counts and a
few names per reason, and the closest machines), whose size does not grow with the cluster. It
is made from the same stored explanation, so it shows exactly the machines and words the full
one does (a member sees only the machines of the workspace's pools)."""

from __future__ import annotations

from typing import TypeVar

from aiohttp import web

from astraeus.shared import Run, Task
from astraeus.shared.explanation import grouped

from .errors import fail
from .views import DryRun

FULL, GROUPED = "full", "grouped"
QUERY = {"explain": f"{FULL} (default: every machine, as the guide shows) or {GROUPED}"}

Explained = TypeVar("Explained", Task, DryRun)


def wants_grouped(request: web.Request) -> bool:
    """Whether the request asks `explain=grouped`; 400 naming `explain` for anything else."""
    raw = request.query.get("explain", FULL)
    if raw not in (FULL, GROUPED):
        fail(400, "bad explain", "explain", f"must be {FULL} or {GROUPED}, got {raw!r}")
    return raw == GROUPED


def group(item: Explained) -> Explained:
    """A task or dry run with its explanation grouped (unchanged when it has none)."""
    if item.placement is None:
        return item
    summary = grouped(item.placement, item.rejections)
    return item.model_copy(
        update={"placement": None, "rejections": None, "placement_grouped": summary}
    )


def group_run(run: Run) -> Run:
    return run.model_copy(update={"tasks": [group(task) for task in run.tasks]})
