"""Fake machines: the real agent runtime (report loop, runner, real worker processes) over the
agent's fake discovery backend, one per machine description file."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import aiohttp

from astraeus.agent.fake import load_fake_machine
from astraeus.agent.inventory import Scanner, scanner_for
from astraeus.agent.runtime import Agent, LoopConfig, Outbox, Runner, RunnerConfig, StateDir
from astraeus.agent.runtime.client import CoordinatorClient
from astraeus.agent.runtime.launch import ProcessLauncher
from astraeus.agent.runtime.main import uverbs_nodes
from astraeus.agent.runtime.users import WorkerUsers
from astraeus.agent.settings import MachineSettings

MACHINES = "astraeus.coordinator.demo.machines"
STOP_GRACE_SECONDS = 2.0


def machine_files() -> list[Path]:
    """The demo's machine descriptions, in name order."""
    folder = resources.files(MACHINES)
    return sorted(Path(str(f)) for f in folder.iterdir() if f.name.endswith(".toml"))


@dataclass
class FakeAgent:
    """One fake machine's agent, run as a task of the demo's event loop."""

    name: str
    runner: Runner
    scanner: Scanner
    task: asyncio.Task[None] | None = None
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    @classmethod
    def create(cls, description: Path, state_dir: Path) -> FakeAgent:
        name = load_fake_machine(str(description)).name
        root = state_dir / name
        # Built as every agent command builds its scanner (`scanner_for`), from the settings.
        settings = MachineSettings(
            name=name, backend=f"fake:{description}", state_dir=root / "data"
        )
        scanner = scanner_for(settings)
        config = RunnerConfig(
            stop_grace_seconds=STOP_GRACE_SECONDS,
            uverbs=lambda: uverbs_nodes(scanner.sysfs_root),
            # A single-user demo: its workers run as whoever runs it, root included, so they
            # can use this Python wherever it is installed (docs/security.md).
            users=WorkerUsers.agents_own(root_allowed=True),
        )
        # Plain child processes: a demo must not leave systemd units behind.
        runner = Runner(StateDir(root), Outbox(root / "outbox.json"), ProcessLauncher(), config)
        return cls(name, runner, scanner)

    def start(self, session: aiohttp.ClientSession, api: str, token: str) -> None:
        client = CoordinatorClient(session, api, self.name, token)
        agent = Agent(client, self.runner, self.scanner.scan, config=LoopConfig())
        self.task = asyncio.create_task(agent.run(self.stop), name=f"agent {self.name}")

    async def close(self) -> None:
        """Stop reporting, then stop this machine's workers: they outlive a real agent, not
        the demo."""
        self.stop.set()
        if self.task is not None:
            await self.task
        for record in list(self.runner.records.values()):
            self.runner.stop(record, "the demo stopped")
        deadline = time.monotonic() + STOP_GRACE_SECONDS + 2
        while time.monotonic() < deadline and not all(
            record.state.ended for record in self.runner.records.values()
        ):
            self.runner.watch()
            await asyncio.sleep(0.1)
        self.scanner.close()
