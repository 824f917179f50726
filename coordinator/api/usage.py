"""`GET /api/v1/usage`: each workspace's use of the cluster (fair share, `store/usage.py`).
A member sees their own workspace's row and the cluster's total, never another workspace."""

from __future__ import annotations

from aiohttp import web

from astraeus.coordinator.store import Role
from astraeus.coordinator.store.queue import WorkspaceUse, use_by_workspace
from astraeus.coordinator.store.usage import WorkspaceUsage, read_usage_rows, waiting_by_workspace
from astraeus.shared import MachineState
from astraeus.shared.views import ClusterUsage, UsageView, WorkspaceUsageView

from .auth import require_user
from .keys import CLOCK, RECORDS, SCHEDULER, SETTINGS, STORE
from .routes import Route

HOUR = 3600.0


async def usage(request: web.Request) -> web.Response:
    who = require_user(request)
    app = request.app
    store, now = app[STORE], app[CLOCK].now()
    half_life = app[SETTINGS].fair_share_half_life_seconds
    scheduler = app[SCHEDULER]
    gpus = sum(
        len(record.report.gpus)
        for record in app[RECORDS].all()
        if record.report is not None
        and record.state(now, scheduler.down_after, scheduler.heard_since) == MachineState.UP
    )
    used = {rows.workspace: rows for rows in read_usage_rows(store.database, now, half_life)}
    held = use_by_workspace(store.database)
    waiting = waiting_by_workspace(store.database)
    weights = {w.name: w.fair_share_weight for w in store.workspaces.all()}
    names = sorted(weights.keys() | used.keys())
    if who.role != Role.ADMIN:
        names = [name for name in names if name == who.workspace]
    rows = [
        _row(name, used.get(name), weights.get(name, 1.0), held, waiting, gpus) for name in names
    ]
    everyone = used.values()
    cluster = ClusterUsage(
        gpus=gpus,
        gpus_in_use=sum(use.gpus for use in held.values()),
        gpu_hours_day=sum(u.gpu_seconds_day for u in everyone) / HOUR,
        gpu_hours_week=sum(u.gpu_seconds_week for u in everyone) / HOUR,
        runs_waiting=sum(waiting.values()),
    )
    view = UsageView(workspaces=rows, cluster=cluster, half_life_seconds=half_life)
    return web.Response(text=view.model_dump_json(), content_type="application/json")


def _row(
    name: str,
    use: WorkspaceUsage | None,
    weight: float,
    held: dict[str, WorkspaceUse],
    waiting: dict[str, int],
    gpus: int,
) -> WorkspaceUsageView:
    use = use or WorkspaceUsage(name)
    now_gpus = held.get(name, WorkspaceUse()).gpus
    return WorkspaceUsageView(
        workspace=name,
        gpu_hours_day=use.gpu_seconds_day / HOUR,
        gpu_hours_week=use.gpu_seconds_week / HOUR,
        decayed_gpu_hours=use.gpu_seconds / HOUR,
        decayed_core_hours=use.core_seconds / HOUR,
        weight=weight,
        gpus_now=now_gpus,
        share_now=now_gpus / gpus if gpus else 0.0,
        runs_waiting=waiting.get(name, 0),
    )


ROUTES = (
    Route(
        "GET",
        "/api/v1/usage",
        usage,
        "GPU-hours, decayed usage, weight, share now and runs waiting per workspace (a member:"
        " their own) and the cluster's total",
        "member",
        response=UsageView,
    ),
)
