"""A real coordinator (real engine, SQLite file, aiohttp on 127.0.0.1) and real agents (report
loop, runner, real worker processes) over the agent's fake discovery backend: the tenants'
view of a shared cluster, for tests that attack it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from helpers import until_async

from astraeus.agent.fake import load_fake_machine
from astraeus.agent.inventory import Scanner
from astraeus.agent.runtime import Agent, LoopConfig, Outbox, Runner, RunnerConfig, StateDir
from astraeus.agent.runtime.client import CoordinatorClient
from astraeus.agent.runtime.launch import ProcessLauncher
from astraeus.agent.runtime.users import WorkerUsers
from astraeus.coordinator.api import SCHEDULER, create_app
from astraeus.coordinator.settings import Settings
from astraeus.coordinator.store import Role, Store
from astraeus.shared.clock import SystemClock

WORKER = (
    "import os, pathlib, sys, time\n"
    "print(sys.argv[1], flush=True)\n"
    "while not pathlib.Path(sys.argv[2]).exists():\n"
    "    time.sleep(0.05)\n"
)
"""Prints its first argument, then waits until the file named by the second exists."""


def worker(says: str, until: Path) -> list[str]:
    return [sys.executable, "-S", "-c", WORKER, says, str(until)]


@dataclass
class FakeAgent:
    """One machine's real agent, run as a task of the test's event loop."""

    name: str
    agent: Agent
    scanner: Scanner
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    @property
    def runner(self) -> Runner:
        return self.agent.runner


@dataclass
class Cluster:
    root: Path
    settings: Settings | None = None
    store: Store | None = None
    app: web.Application | None = None
    web_runner: web.AppRunner | None = None
    session: aiohttp.ClientSession | None = None
    admin: str = ""
    agents: dict[str, FakeAgent] = field(default_factory=dict)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, **changes: Any) -> None:
        base = Settings(
            db=self.root / "astraeus.db",
            state_dir=self.root,
            scheduler=False,
            pass_process=False,
            report_interval_seconds=0.1,
        )
        self.settings = replace(base, **changes)
        self.store = Store.open(self.settings.db)
        self.app = create_app(self.settings, store=self.store, clock=SystemClock())
        self.web_runner = web.AppRunner(self.app, access_log=None)
        await self.web_runner.setup()
        await web.TCPSite(self.web_runner, "127.0.0.1", 0).start()
        self.port = int(self.web_runner.addresses[0][1])
        self.admin, _ = self.store.tokens.create(Role.ADMIN, SystemClock().now())
        self.session = aiohttp.ClientSession()

    async def call(
        self, method: str, path: str, token: str | None = None, body: Any = None
    ) -> tuple[int, Any]:
        assert self.session is not None
        headers = {"Authorization": f"Bearer {token or self.admin}"}
        async with self.session.request(
            method, f"{self.url}{path}", json=body, headers=headers
        ) as response:
            text = await response.text()
            return response.status, json.loads(text) if text else None

    async def ok(self, method: str, path: str, token: str | None = None, body: Any = None) -> Any:
        status, data = await self.call(method, path, token, body)
        assert status < 300, (status, data)
        return data

    async def workspace(self, name: str, pools: list[str]) -> str:
        """A workspace and a member token for it."""
        await self.ok("PUT", f"/api/v1/workspaces/{name}", body={"pools": pools})
        made = await self.ok("POST", "/api/v1/tokens", body={"role": "member", "workspace": name})
        return str(made["token"])

    async def machine(
        self,
        name: str,
        *,
        pool: str | None = None,
        agent_labels: dict[str, str] | None = None,
        description: str = "h100-sxm",
    ) -> FakeAgent:
        """A fake machine's agent, reporting: its pool given by the admin; `agent_labels` are
        what the agent itself claims."""
        assert self.session is not None
        made = await self.ok("POST", "/api/v1/tokens", body={"role": "agent", "machine": name})
        if pool:
            await self.ok("PUT", f"/api/v1/machines/{name}/labels", body={"labels": {"pool": pool}})
        root = self.root / "agents" / name
        scanner = Scanner(
            name=name,
            backend=load_fake_machine(description, name=name),
            data_dir=root / "data",
            labels=agent_labels or {},
        )
        launcher = ProcessLauncher()
        runner = Runner(
            StateDir(root / "state"),
            Outbox(root / "state" / "outbox.json"),
            launcher,
            # The agent's own user (root, here): these tests are about task identity; workers'
            # users have their own tests (tests/runtime/test_isolation.py).
            RunnerConfig(stop_grace_seconds=1.0, users=WorkerUsers.agents_own(root_allowed=True)),
        )
        client = CoordinatorClient(self.session, self.url, name, str(made["token"]))
        config = LoopConfig(watch_interval_seconds=0.05, backoff_max_seconds=0.5)
        agent = FakeAgent(name, Agent(client, runner, scanner.scan, config=config), scanner)
        agent.task = asyncio.create_task(agent.agent.run(agent.stop))
        self.agents[name] = agent
        await until_async(f"{name}'s first report", lambda: agent.agent.reports > 0)
        return agent

    async def run_pass(self) -> None:
        assert self.app is not None
        await self.app[SCHEDULER].run_pass()

    async def task(self, token: str, name: str) -> dict[str, Any]:
        return dict(await self.ok("GET", f"/api/v1/tasks/{name}", token))

    async def close(self) -> None:
        """Stop the agents, then their workers (they outlive a real agent, not a test)."""
        for agent in self.agents.values():
            agent.stop.set()
            if agent.task is not None:
                with contextlib.suppress(Exception):
                    await agent.task
            runner = agent.runner
            for record in list(runner.records.values()):
                runner.stop(record, "the test ended")
            for _ in range(100):
                runner.watch()
                if all(r.state.ended for r in runner.records.values()):
                    break
                await asyncio.sleep(0.05)
            agent.scanner.close()
        if self.session is not None:
            await self.session.close()
        if self.web_runner is not None:
            await self.web_runner.cleanup()
        if self.store is not None:
            self.store.close()
