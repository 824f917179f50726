"""`usage`: GPU-hours per workspace over the last day and week, decayed usage, weight, share of
the cluster now and runs waiting (a member: their own workspace and the cluster's total)."""

from __future__ import annotations

import argparse

from astraeus.shared.views import UsageView, WorkspaceUsageView

from .context import Context
from .errors import Exit
from .render import table

HEADER = ["WORKSPACE", "GPU-H 24H", "GPU-H 7D", "DECAYED GPU-H", "WEIGHT", "SHARE NOW", "WAITING"]


def _hours(value: float) -> str:
    return f"{value:.1f}"


def _line(row: WorkspaceUsageView) -> list[str]:
    return [
        row.workspace,
        _hours(row.gpu_hours_day),
        _hours(row.gpu_hours_week),
        _hours(row.decayed_gpu_hours),
        f"{row.weight:g}",
        f"{row.share_now:.0%} ({row.gpus_now} GPUs)",
        str(row.runs_waiting),
    ]


def usage(ctx: Context, args: argparse.Namespace) -> int:
    found = UsageView.model_validate(ctx.api.get("/usage"))
    total = found.cluster
    share = total.gpus_in_use / total.gpus if total.gpus else 0.0
    cluster = [
        "(cluster)",
        _hours(total.gpu_hours_day),
        _hours(total.gpu_hours_week),
        "-",
        "-",
        f"{share:.0%} ({total.gpus_in_use} of {total.gpus} GPUs)",
        str(total.runs_waiting),
    ]
    days = found.half_life_seconds / 86400
    lines = table([HEADER, *(_line(row) for row in found.workspaces), cluster])
    lines.append(f"decayed: each GPU-hour counts half after {days:g} days (fair share)")
    ctx.emit(found, lines)
    return Exit.OK
