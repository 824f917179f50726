"""A coordinator with the console, on a real aiohttp server at 127.0.0.1, fed by simulated agents.

Everything a test does to the cluster goes through the HTTP API, as an admin, a member or an
agent would; only the first admin token comes from the store, as the coordinator's CLI does it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from astraeus.coordinator.api import SCHEDULER, create_app
from astraeus.coordinator.console import setup_console
from astraeus.coordinator.settings import Settings
from astraeus.coordinator.store import Role, Store
from astraeus.shared import SCHEMA_VERSION
from astraeus.shared.clock import SystemClock
from astraeus.shared.fake_gpu import gpu_uuid

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-40GB"
SITE = "topology.astraeus.io/site"
RACK = "topology.astraeus.io/rack"
FABRIC = "topology.astraeus.io/fabric"


def gpu(machine: str, index: int, model: str = H100, **extra: Any) -> dict[str, Any]:
    """One GPU as an agent reports it; healthy unless `health` says otherwise."""
    return {
        "index": index,
        "uuid": gpu_uuid(machine, index),
        "vendor": "nvidia",
        "model": model,
        "memory_bytes": 85_520_809_984 if model == H100 else 42_949_672_960,
        **extra,
    }


def report(
    name: str, gpus: list[dict[str, Any]], labels: dict[str, str], **extra: Any
) -> dict[str, Any]:
    """A machine report with 96 cores and 1 TiB of memory."""
    return {
        "schema_version": SCHEMA_VERSION,
        "name": name,
        "labels": labels,
        "cpu_cores": 96,
        "memory_bytes": 1024**4,
        "capabilities": ["container"],
        "gpus": gpus,
        "reported_at": datetime.now(UTC).isoformat(),
        **extra,
    }


@dataclass
class Cluster:
    """The server, its admin token, and a member token for workspace `vision`."""

    server: TestServer
    session: aiohttp.ClientSession
    admin: str
    member: str = ""
    member_id: int = 0
    agents: dict[str, str] = field(default_factory=dict)
    seq: dict[str, int] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return str(self.server.make_url("/"))

    async def call(
        self, method: str, path: str, token: str | None = None, body: Any = None
    ) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {token or self.admin}"}
        async with self.session.request(
            method, self.server.make_url(path), json=body, headers=headers
        ) as response:
            data = await response.json() if response.status != 204 else None
            return response.status, data

    async def ok(self, method: str, path: str, token: str | None = None, body: Any = None) -> Any:
        status, data = await self.call(method, path, token, body)
        assert status in (200, 201, 204), (status, data)
        return data

    async def report(
        self,
        machine: dict[str, Any],
        states: dict[str, str] | None = None,
        logs: dict[str, str] | None = None,
    ) -> None:
        """PUT the machine's report as its agent, with a token made for it on first use, the
        tasks' new `states` (numbered here) and their first `logs`."""
        name = machine["name"]
        if name not in self.agents:
            made = await self.ok("POST", "/api/v1/tokens", body={"role": "agent", "machine": name})
            self.agents[name] = made["token"]
        # The agent learns its tasks' uids from the reply, and names them by uid after.
        given = await self.ok(
            "PUT", f"/api/v1/machines/{name}/report", self.agents[name], {"report": machine}
        )
        uids = {a["task"]: a["task_uid"] for a in given["assignments"]}
        updates = []
        for task, state in (states or {}).items():
            self.seq[name] = self.seq.get(name, -1) + 1
            at = datetime.now(UTC).isoformat()
            uid = uids[task]
            updates.append({"seq": self.seq[name], "task_uid": uid, "state": state, "at": at})
        chunks = [
            {"task_uid": uids[task], "offset": 0, "end": len(data.encode()), "data": data}
            for task, data in (logs or {}).items()
        ]
        body = {"report": machine, "updates": updates, "logs": chunks}
        await self.ok("PUT", f"/api/v1/machines/{name}/report", self.agents[name], body)

    async def run_pass(self) -> None:
        """One scheduler pass, as the background loop would run it."""
        await self.server.app[SCHEDULER].run_pass()


async def start(tmp_path: Path) -> tuple[Cluster, Store]:
    """A coordinator app with the console, its scheduler driven by `run_pass`."""
    settings = Settings(
        db=tmp_path / "astraeus.db",
        state_dir=tmp_path,
        scheduler=False,
        pass_process=False,  # as tests/coordinator/conftest.py says: no worker to spawn
        down_after_seconds=3600,
        lost_after_seconds=7200,
        # No load shedding: the test's own reports share the coordinator's event loop, and a
        # busy machine would have them refused (shedding is tested in tests/coordinator).
        max_report_delay_seconds=0,
    )
    store = Store.open(settings.db, log_cap_bytes=settings.log_cap_bytes)
    app: web.Application = create_app(settings, store=store, clock=SystemClock())
    setup_console(app)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    admin, _ = store.tokens.create(Role.ADMIN, SystemClock().now())
    cluster = Cluster(server=server, session=aiohttp.ClientSession(), admin=admin)
    await cluster.ok("PUT", "/api/v1/workspaces/vision", body={"pools": []})
    member = {"role": "member", "workspace": "vision"}
    made = await cluster.ok("POST", "/api/v1/tokens", body=member)
    cluster.member = made["token"]
    cluster.member_id = made["info"]["id"]
    return cluster, store


async def stop(cluster: Cluster, store: Store) -> None:
    await cluster.session.close()
    await cluster.server.close()
    store.close()
