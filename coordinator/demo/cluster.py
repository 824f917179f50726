"""The demo's coordinator on 127.0.0.1 with its SQLite file, its tokens and its fake machines."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from aiohttp import web

from astraeus.coordinator.api import RECORDS, create_app
from astraeus.coordinator.api.errors import MAX_REQUEST_LINE
from astraeus.coordinator.settings import Settings
from astraeus.coordinator.store import Role, Store
from astraeus.shared.admin import WorkspaceSpec
from astraeus.shared.clock import SystemClock

from .agents import FakeAgent, machine_files

WORKSPACE = "demo"
POOL = "demo"


def demo_settings(state_dir: Path, port: int) -> Settings:
    """Agents report every second and passes run often, so the story moves at reading speed."""
    return Settings(
        db=state_dir / "astraeus.db",
        listen=f"127.0.0.1:{port}",
        state_dir=state_dir,
        cluster_name="demo",
        report_interval_seconds=1.0,
        pass_interval_seconds=1.0,
        pass_debounce_seconds=0.05,
    )


@dataclass
class DemoCluster:
    state_dir: Path
    port: int = 0
    store: Store | None = None
    runner: web.AppRunner | None = None
    session: aiohttp.ClientSession | None = None
    agents: list[FakeAgent] = field(default_factory=list)
    admin_token: str = ""
    member_token: str = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        """The coordinator, the workspace `demo` (pool `demo`), then one agent per machine."""
        settings = demo_settings(self.state_dir, self.port)
        clock = SystemClock()
        self.store = store = Store.open(settings.db, log_cap_bytes=settings.log_cap_bytes)
        app = create_app(settings, store=store, clock=clock)
        records = app[RECORDS]
        self.runner = web.AppRunner(app, access_log=None, max_line_size=MAX_REQUEST_LINE)
        await self.runner.setup()
        await web.TCPSite(self.runner, settings.host, settings.port).start()
        self.port = int(self.runner.addresses[0][1])
        now = clock.now()
        self.admin_token, _ = store.tokens.create(Role.ADMIN, now, description="demo admin")
        store.workspaces.put(WorkspaceSpec(name=WORKSPACE, pools=[POOL]), now)
        self.member_token, _ = store.tokens.create(
            Role.MEMBER, now, workspace=WORKSPACE, description="demo user"
        )
        self.session = aiohttp.ClientSession()
        for description in machine_files():
            agent = FakeAgent.create(description, self.state_dir / "agents")
            records.ensure(agent.name, now)
            # The pool is the admin's to give (agents' own `pool` labels are ignored).
            records.set_labels(agent.name, {"pool": POOL})
            token, _ = store.tokens.create(Role.AGENT, now, machine=agent.name)
            agent.start(self.session, self.url, token)
            self.agents.append(agent)

    async def close(self) -> None:
        for agent in self.agents:
            await agent.close()
        if self.session is not None:
            await self.session.close()
        if self.runner is not None:
            await self.runner.cleanup()
        if self.store is not None:
            self.store.close()
