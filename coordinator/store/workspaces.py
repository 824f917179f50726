"""Workspaces: the pools they are granted, optional GPU, CPU and memory quotas, the highest
priority allowed, the fair-share weight, the guaranteed GPUs."""

from __future__ import annotations

import json
from datetime import datetime

from astraeus.shared.admin import Workspace, WorkspaceSpec

from .db import Database, Row


class Workspaces:
    def __init__(self, database: Database) -> None:
        self._database = database

    def put(self, spec: WorkspaceSpec, now: datetime) -> tuple[Workspace, bool]:
        """Create or replace; the flag says whether it was created."""
        existing = self.get(spec.name)
        with self._database.write() as conn:
            conn.execute(
                "INSERT INTO workspaces (name, pools, gpu_quota, cpu_quota, memory_quota,"
                " max_priority, fair_share_weight, guaranteed_gpus, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (name) DO UPDATE SET pools = excluded.pools,"
                " gpu_quota = excluded.gpu_quota, cpu_quota = excluded.cpu_quota,"
                " memory_quota = excluded.memory_quota, max_priority = excluded.max_priority,"
                " fair_share_weight = excluded.fair_share_weight,"
                " guaranteed_gpus = excluded.guaranteed_gpus",
                (
                    spec.name,
                    json.dumps(spec.pools),
                    spec.gpu_quota,
                    spec.cpu_quota,
                    spec.memory_quota,
                    spec.max_priority,
                    spec.fair_share_weight,
                    spec.guaranteed_gpus,
                    now.isoformat(),
                ),
            )
        stored = self.get(spec.name)
        assert stored is not None  # noqa: S101 - just written in this thread
        return stored, existing is None

    def get(self, name: str) -> Workspace | None:
        row = self._database.read_one("SELECT * FROM workspaces WHERE name = ?", (name,))
        return _workspace(row) if row else None

    def all(self) -> list[Workspace]:
        return [
            _workspace(r) for r in self._database.read("SELECT * FROM workspaces ORDER BY name")
        ]


def _workspace(row: Row) -> Workspace:
    return Workspace(
        name=row["name"],
        pools=json.loads(row["pools"]),
        gpu_quota=row["gpu_quota"],
        cpu_quota=row["cpu_quota"],
        memory_quota=row["memory_quota"],
        max_priority=row["max_priority"],
        fair_share_weight=row["fair_share_weight"],
        guaranteed_gpus=row["guaranteed_gpus"],
        created_at=row["created_at"],
    )
