"""A real coordinator (real placement, real SQLite file) served on 127.0.0.1 from a thread, so
the blocking `astra` CLI can talk to it from the test's own thread."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import urllib.request
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web

from astraeus.coordinator.api import SCHEDULER, create_app
from astraeus.coordinator.settings import Settings
from astraeus.coordinator.store import Role, Store
from astraeus.coordinator.tls import ServerCertificate
from astraeus.shared import SCHEMA_VERSION
from astraeus.shared.clock import SystemClock
from astraeus.shared.fake_gpu import gpu_uuid
from astraeus.shared.tls import client_context

CONSOLE_URL = "https://console.astralyx.cloud/o/acme/w/vision/"
H100 = "NVIDIA H100 80GB HBM3"
A100_40 = "NVIDIA A100-SXM4-40GB"


def gpu_report(
    name: str, gpus: int, model: str, memory_gb: float, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    """A machine report as an agent sends it: `gpus` healthy GPUs of one model, each a little
    under `memory_gb` GiB as real cards report (an H100 80GB shows 79.6)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "name": name,
        "advertise_address": "127.0.0.1",
        "labels": labels or {},
        "cpu_cores": 192,
        "memory_bytes": 2048 * 1024**3,
        "gpus": [
            {
                "index": i,
                "uuid": gpu_uuid(name, i),
                "vendor": "nvidia",
                "model": model,
                "memory_bytes": int(memory_gb * 1024**3) - 400 * 1024**2,
            }
            for i in range(gpus)
        ],
    }


@dataclass
class Coordinator:
    """The coordinator under test; passes run only when a test asks (`run_pass`). With `tls`
    (certificate, key, the CA that signed them) it serves HTTPS, and listens on the port it
    names in its `listen` setting, as a deployed coordinator does."""

    root: Path
    console_url: str = CONSOLE_URL
    tls: tuple[Path, Path, Path] | None = None
    store: Store | None = None
    app: web.Application | None = None
    runner: web.AppRunner | None = None
    port: int = 0
    admin: str = ""
    agent_tokens: dict[str, str] = field(default_factory=dict)
    seq: dict[str, int] = field(default_factory=dict)
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def start(self) -> None:
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result()

    async def _start(self) -> None:
        listening = socket.socket()
        listening.bind(("127.0.0.1", 0))
        self.port = listening.getsockname()[1]
        settings = replace(
            Settings(
                db=self.root / "astraeus.db",
                scheduler=False,
                pass_process=False,  # as tests/coordinator/conftest.py says: no worker to spawn
                cluster_name="gpu-east",
                console_url=self.console_url,
                listen=f"127.0.0.1:{self.port}",
                tls_cert=self.tls[0] if self.tls else None,
                tls_key=self.tls[1] if self.tls else None,
            )
        )
        self.store = Store.open(settings.db)
        self.app = create_app(settings, store=self.store, clock=SystemClock())
        self.runner = web.AppRunner(self.app, access_log=None)
        await self.runner.setup()
        served = ServerCertificate(self.tls[0], self.tls[1]).context if self.tls else None
        site = web.SockSite(self.runner, listening, ssl_context=served)
        await site.start()
        self.admin, _ = self.store.tokens.create(Role.ADMIN, SystemClock().now())

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)

    async def _stop(self) -> None:
        assert self.runner is not None
        assert self.store is not None
        await self.runner.cleanup()
        self.store.close()

    def call(self, method: str, path: str, body: Any = None, token: str | None = None) -> Any:
        request = urllib.request.Request(  # noqa: S310 - always our http://127.0.0.1 URL
            f"{self.url}{path}",
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={
                "Authorization": f"Bearer {token or self.admin}",
                "Content-Type": "application/json",
            },
        )
        context = client_context(self.tls[2]) if self.tls else None
        with urllib.request.urlopen(request, context=context) as response:  # noqa: S310
            raw = response.read()
        return json.loads(raw) if raw else None

    def member(self, workspace: str, pools: list[str] | None = None) -> str:
        """Create a workspace and answer a member token for it."""
        self.call("PUT", f"/api/v1/workspaces/{workspace}", {"pools": pools or []})
        body = {"role": "member", "workspace": workspace}
        return str(self.call("POST", "/api/v1/tokens", body)["token"])

    def report(
        self,
        report: dict[str, Any],
        updates: list[dict[str, Any]] | None = None,
        logs: list[dict[str, Any]] | None = None,
    ) -> None:
        """Report a machine as its agent would, with task updates (numbered here) and logs."""
        name = report["name"]
        labels = dict(report.get("labels", {}))
        pool = {"pool": labels.pop("pool")} if "pool" in labels else {}
        report = {**report, "labels": labels}
        if name not in self.agent_tokens:
            # An admin grants the pool with the agent's token: an agent's own is ignored.
            body = {"role": "agent", "machine": name, "labels": pool}
            self.agent_tokens[name] = self.call("POST", "/api/v1/tokens", body)["token"]
        # As an agent: the reply names each task's uid; updates and logs name tasks by it.
        path = f"/api/v1/machines/{name}/report"
        given = self.call("PUT", path, {"report": report}, self.agent_tokens[name])
        uids = {a["task"]: a["task_uid"] for a in given["assignments"]}
        numbered = []
        for update in updates or []:
            self.seq[name] = self.seq.get(name, -1) + 1
            uid = uids[update.pop("task")]
            at = datetime.now(UTC).isoformat()
            numbered.append({"seq": self.seq[name], "at": at, "task_uid": uid, **update})
        chunks = [
            {
                "task_uid": uids[chunk["task"]],
                "offset": chunk["offset"],
                "end": chunk["offset"] + len(chunk["data"].encode()),
                "data": chunk["data"],
            }
            for chunk in logs or []
        ]
        body = {"report": report, "updates": numbered, "logs": chunks}
        self.call("PUT", f"/api/v1/machines/{name}/report", body, self.agent_tokens[name])

    def run_pass(self) -> None:
        assert self.app is not None
        future = asyncio.run_coroutine_threadsafe(self.app[SCHEDULER].run_pass(), self.loop)
        future.result()
