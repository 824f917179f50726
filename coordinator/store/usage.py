"""Each workspace's usage, for fair share: GPU-seconds held by its tasks (core-seconds for tasks
holding no GPU, counted apart), decayed with a half-life, with raw totals and hourly buckets.

`accrue` counts from the task rows, exactly: a task holds from `assigned_at` until `ended_at`
(or now while it is live, or Lost and still holding), so what ran between two accruals, and
while the coordinator was stopped, is counted once. The time counted up to is kept
(`usage_clock`), so a restart goes on from there. Plain SQL; the arithmetic is done here."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from .db import Database
from .rows import when

HOUR = timedelta(hours=1)
KEEP_HOURS = timedelta(days=8)
"""Hourly buckets older than this are pruned: the last week is the longest window shown."""


@dataclass(frozen=True, slots=True)
class WorkspaceUsage:
    """One workspace's usage as stored: decayed as of `as_of`, raw totals, and the GPU-seconds
    of the last day and week (from the hourly buckets)."""

    workspace: str
    gpu_seconds: float = 0.0
    core_seconds: float = 0.0
    gpu_seconds_total: float = 0.0
    core_seconds_total: float = 0.0
    gpu_seconds_day: float = 0.0
    gpu_seconds_week: float = 0.0


def decay(half_life_seconds: float, seconds: float) -> float:
    """What one unit of usage counts for `seconds` later."""
    if seconds <= 0:
        return 1.0
    return math.pow(0.5, seconds / half_life_seconds)


def _hour_of(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def split_by_hour(start: datetime, end: datetime) -> list[tuple[datetime, float]]:
    """[start, end) as (hour it falls in, seconds) pieces."""
    pieces: list[tuple[datetime, float]] = []
    while start < end:
        hour = _hour_of(start)
        stop = min(end, hour + HOUR)
        pieces.append((hour, (stop - start).total_seconds()))
        start = stop
    return pieces


def usage_as_of(database: Database) -> datetime | None:
    row = database.read_one("SELECT as_of FROM usage_clock WHERE id = 1")
    return when(row["as_of"]) if row else None


def accrue(database: Database, now: datetime, half_life_seconds: float) -> None:
    """Count usage from the last accrual up to `now`: decay what was counted, add what tasks
    held meanwhile, per workspace and per hour. The first accrual only starts the clock."""
    since = usage_as_of(database)
    if since is None or now <= since:
        if since is None:
            with database.write() as conn:
                conn.execute(
                    "INSERT INTO usage_clock (id, as_of) VALUES (1, ?)", (now.isoformat(),)
                )
        return
    rows = database.tuples(
        "SELECT runs.workspace, tasks.gpu_ids, tasks.cpu_cores, tasks.assigned_at,"
        " tasks.ended_at, tasks.held FROM tasks JOIN runs ON runs.seq = tasks.run_seq"
        " WHERE tasks.state IN ('Assigned', 'Starting', 'Running') OR tasks.held = 1"
        " UNION ALL SELECT runs.workspace, tasks.gpu_ids, tasks.cpu_cores, tasks.assigned_at,"
        " tasks.ended_at, tasks.held FROM tasks JOIN runs ON runs.seq = tasks.run_seq"
        " WHERE tasks.ended_at > ? AND tasks.held = 0 AND tasks.state NOT IN"
        " ('Assigned', 'Starting', 'Running')",
        (since.isoformat(),),
    )
    gpu: dict[str, float] = {}
    cores: dict[str, float] = {}
    hours: dict[tuple[str, datetime], list[float]] = {}
    for workspace, gpu_ids, cpu_cores, assigned_at, ended_at, held in rows:
        start = when(assigned_at)
        if start is None:
            continue
        end = now if held or ended_at is None else min(now, when(ended_at) or now)
        start = max(start, since)
        if end <= start:
            continue
        count = len(json.loads(gpu_ids))
        for hour, seconds in split_by_hour(start, end):
            bucket = hours.setdefault((workspace, hour), [0.0, 0.0])
            if count:
                gpu[workspace] = gpu.get(workspace, 0.0) + count * seconds
                bucket[0] += count * seconds
            else:
                cores[workspace] = cores.get(workspace, 0.0) + float(cpu_cores) * seconds
                bucket[1] += float(cpu_cores) * seconds
    factor = decay(half_life_seconds, (now - since).total_seconds())
    stamp = now.isoformat()
    with database.write() as conn:
        conn.execute(
            "UPDATE workspace_usage SET gpu_seconds = gpu_seconds * ?,"
            " core_seconds = core_seconds * ?, as_of = ?",
            (factor, factor, stamp),
        )
        for workspace in sorted(gpu.keys() | cores.keys()):
            g, c = gpu.get(workspace, 0.0), cores.get(workspace, 0.0)
            conn.execute(
                "INSERT INTO workspace_usage (workspace, gpu_seconds, core_seconds,"
                " gpu_seconds_total, core_seconds_total, as_of) VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (workspace) DO UPDATE SET"
                " gpu_seconds = workspace_usage.gpu_seconds + excluded.gpu_seconds,"
                " core_seconds = workspace_usage.core_seconds + excluded.core_seconds,"
                " gpu_seconds_total = workspace_usage.gpu_seconds_total + excluded.gpu_seconds,"
                " core_seconds_total = workspace_usage.core_seconds_total"
                " + excluded.core_seconds",
                (workspace, g, c, g, c, stamp),
            )
        for (workspace, hour), (g, c) in sorted(hours.items()):
            conn.execute(
                "INSERT INTO usage_hours (workspace, hour, gpu_seconds, core_seconds)"
                " VALUES (?, ?, ?, ?) ON CONFLICT (workspace, hour) DO UPDATE SET"
                " gpu_seconds = usage_hours.gpu_seconds + excluded.gpu_seconds,"
                " core_seconds = usage_hours.core_seconds + excluded.core_seconds",
                (workspace, hour.isoformat(), g, c),
            )
        conn.execute(
            "DELETE FROM usage_hours WHERE hour < ?", ((_hour_of(now) - KEEP_HOURS).isoformat(),)
        )
        conn.execute("UPDATE usage_clock SET as_of = ? WHERE id = 1", (stamp,))


def fair_share_order(database: Database) -> dict[str, tuple[float, float]]:
    """Per workspace with a row: (decayed GPU-seconds, decayed core-seconds) divided by its
    weight, lowest first in the queue among runs of equal priority. All rows share one
    `as_of`, so comparing them needs no decay to now. A workspace without a row is (0, 0)."""
    rows = database.tuples(
        "SELECT workspace_usage.workspace, workspace_usage.gpu_seconds,"
        " workspace_usage.core_seconds, workspaces.fair_share_weight FROM workspace_usage"
        " LEFT JOIN workspaces ON workspaces.name = workspace_usage.workspace"
    )
    order: dict[str, tuple[float, float]] = {}
    for workspace, gpu_seconds, core_seconds, weight in rows:
        w = float(weight) if weight else 1.0
        order[workspace] = (gpu_seconds / w, core_seconds / w)
    return order


def read_usage_rows(
    database: Database, now: datetime, half_life_seconds: float
) -> list[WorkspaceUsage]:
    """Every workspace with usage, decayed to `now`, with its last day's and week's
    GPU-seconds."""
    as_of = usage_as_of(database)
    factor = decay(half_life_seconds, (now - as_of).total_seconds()) if as_of else 1.0
    day = (_hour_of(now) - timedelta(hours=23)).isoformat()
    week = (_hour_of(now) - timedelta(hours=24 * 7 - 1)).isoformat()
    windows = {
        workspace: (float(d or 0.0), float(w or 0.0))
        for workspace, d, w in database.tuples(
            "SELECT workspace, sum(CASE WHEN hour >= ? THEN gpu_seconds ELSE 0 END),"
            " sum(CASE WHEN hour >= ? THEN gpu_seconds ELSE 0 END) FROM usage_hours"
            " GROUP BY workspace",
            (day, week),
        )
    }
    rows = database.tuples(
        "SELECT workspace, gpu_seconds, core_seconds, gpu_seconds_total, core_seconds_total"
        " FROM workspace_usage ORDER BY workspace"
    )
    return [
        WorkspaceUsage(
            workspace,
            gpu_seconds * factor,
            core_seconds * factor,
            gpu_total,
            core_total,
            *windows.get(workspace, (0.0, 0.0)),
        )
        for workspace, gpu_seconds, core_seconds, gpu_total, core_total in rows
    ]


def waiting_by_workspace(database: Database) -> dict[str, int]:
    """Pending runs per workspace."""
    return {
        workspace: n
        for workspace, n in database.tuples(
            "SELECT workspace, count(*) FROM runs WHERE state = 'Pending' GROUP BY workspace"
        )
    }


def gpu_seconds_totals(database: Database) -> list[tuple[str, float]]:
    """Raw GPU-seconds per workspace since usage was first counted (`/metrics`' counter)."""
    return [
        (workspace, float(total))
        for workspace, total in database.tuples(
            "SELECT workspace, gpu_seconds_total FROM workspace_usage ORDER BY workspace"
        )
    ]
