"""Test rig: a coordinator on 127.0.0.1 speaking the report contract, agents wired to it."""

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import NAMESPACE_URL, uuid5

import aiohttp
from aiohttp import web

from astraeus.agent.runtime import (
    Agent,
    LoopConfig,
    Outbox,
    Runner,
    RunnerConfig,
    StateDir,
)
from astraeus.agent.runtime.client import CoordinatorClient
from astraeus.agent.runtime.launch import ProcessLauncher
from astraeus.agent.runtime.users import WorkerUsers
from astraeus.shared import (
    SCHEMA_VERSION,
    AgentReport,
    Assignment,
    MachineReport,
    ReportReply,
    TaskState,
    TaskUpdate,
)
from astraeus.shared.fake_gpu import gpu_uuid
from astraeus.shared.sdnotify import Notifier

TOKEN = "agent-token-gpu-01"  # noqa: S105 - a test token, not a secret


def uuid(i: int) -> str:
    """GPU `i` of the rig's machine `gpu-01`, in the one fake UUID format (`fake_gpu.py`)."""
    return gpu_uuid("gpu-01", i)


def machine_report() -> MachineReport:
    """A 2-GPU NVIDIA machine with one fast and one slow InfiniBand port."""
    ports = [
        {"device": "mlx5_0", "port": 1, "state": "ACTIVE", "link_layer": "InfiniBand"},
        {"device": "mlx5_1", "port": 1, "state": "ACTIVE", "link_layer": "InfiniBand"},
    ]
    ports[0]["rate_gbps"], ports[1]["rate_gbps"] = 400, 100
    gpus = [
        {"index": i, "uuid": uuid(i), "vendor": "nvidia", "model": "H100", "memory_bytes": 1,
         "device_node": f"/dev/nvidia{i}"}
        for i in range(2)
    ]  # fmt: skip
    return MachineReport.model_validate(
        {
            "schema_version": SCHEMA_VERSION,
            "name": "gpu-01",
            "cpu_cores": 8,
            "memory_bytes": 64 * 1024**3,
            "gpus": gpus,
            "rdma_ports": ports,
        }
    )


def uid_of(task: str, workspace: str = "vision") -> str:
    """The task uid these tests give a task name: fixed, so tests can ask by name."""
    return str(uuid5(NAMESPACE_URL, f"astraeus-test/{workspace}/{task}"))


def assignment(task: str, command: list[str], **extra: Any) -> Assignment:
    """Task `task` of run `train` on this machine, rank 0 of 2."""
    rendezvous = {
        "master_addr": "127.0.0.1",
        "master_port": 29500,
        "world_size": 2,
        "rank": 0,
        "node_rank": 0,
        "local_world_size": 1,
    }
    data = {
        "task_uid": uid_of(task, extra.get("workspace", "vision")),
        "task": task,
        "run": "train",
        "workspace": "vision",
        "index": 0,
        "command": command,
        "rendezvous": rendezvous,
        **extra,
    }
    return Assignment.model_validate(data)


def python(code: str, *args: str) -> list[str]:
    """A worker command: this Python running `code`."""
    return [sys.executable, "-S", "-c", code, *args]


@dataclass
class Coordinator:
    """Keeps what agents report, as the real coordinator must: updates by seq, logs by offset."""

    assignments: dict[str, Assignment] = field(default_factory=dict)
    updates: dict[int, TaskUpdate] = field(default_factory=dict)
    logs: dict[str, bytearray] = field(default_factory=dict)
    reports: int = 0
    batches: list[int] = field(default_factory=list)
    """How many updates each report carried."""
    arrived: int = 0
    running: list[list[str] | None] = field(default_factory=list)
    """The `tasks` of every report, in order: what the agent said it runs."""
    capabilities: list[list[str]] = field(default_factory=list)
    """The machine's `capabilities` in every report, in order."""
    hold: asyncio.Event | None = None
    """While set to an unset event, reports are received but not answered."""
    port: int = 0
    runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def states(self, task: str) -> list[TaskState]:
        uid = uid_of(task)
        return [u.state for _, u in sorted(self.updates.items()) if u.task_uid == uid]

    def last(self, task: str) -> TaskUpdate | None:
        uid = uid_of(task)
        found = [u for _, u in sorted(self.updates.items()) if u.task_uid == uid]
        return found[-1] if found else None

    def log(self, task: str) -> str:
        return bytes(self.logs.get(uid_of(task), b"")).decode()

    async def handle(self, request: web.Request) -> web.Response:
        self.arrived += 1
        if self.hold is not None:
            await self.hold.wait()
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return web.json_response({"error": "bad token"}, status=401)
        body = AgentReport.model_validate(await request.json())
        self.reports += 1
        self.batches.append(len(body.updates))
        self.running.append(body.tasks)
        self.capabilities.append(body.report.capabilities)
        for update in body.updates:
            self.updates[update.seq] = update
            if update.state.ended:
                for name, given in list(self.assignments.items()):
                    if given.task_uid == update.task_uid:
                        del self.assignments[name]
        for chunk in body.logs:
            data = self.logs.setdefault(chunk.task_uid, bytearray())
            if chunk.offset == len(data):
                data.extend(chunk.data.encode())
        reply = ReportReply(
            acked_seq=max(self.updates, default=-1),
            assignments=list(self.assignments.values()),
            report_interval_seconds=0.1,
        )
        return web.json_response(reply.model_dump(mode="json"))

    async def start(self) -> None:
        """Listen on 127.0.0.1: a fresh port the first time, the same one after `down`."""
        app = web.Application()
        app.router.add_put("/api/v1/machines/{name}/report", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", self.port, reuse_address=True)
        await site.start()
        if not self.port:
            server = site._server
            assert isinstance(server, asyncio.Server)
            self.port = server.sockets[0].getsockname()[1]

    async def down(self) -> None:
        """Close the port and every open connection: agents are refused, as in a real outage."""
        assert self.runner is not None
        await self.runner.cleanup()
        self.runner = None


AGENT_ENV = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "NOTIFY_SOCKET": "/run/systemd/notify",
    "WATCHDOG_USEC": "30000000",
    "WATCHDOG_PID": "1",
    "ASTRAEUS_TOKEN_FILE": "/etc/astraeus/token",
}
"""The agent's own environment in these tests: what must and must not reach a worker."""


@dataclass
class Harness:
    """Starts and stops agents on one state directory, as a machine would across restarts."""

    coordinator: Coordinator
    state_dir: Path
    session: aiohttp.ClientSession
    notifier: Notifier = field(default_factory=lambda: Notifier({}))
    agent: Agent | None = None
    task: asyncio.Task[None] | None = None
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    launchers: list[ProcessLauncher] = field(default_factory=list)

    users: WorkerUsers = field(default_factory=lambda: WorkerUsers.agents_own(root_allowed=True))
    """Workers as the test's own user, root included, unless a test asks for isolation."""
    work_root: Path | None = None
    container_runtime: str | None = None
    agent_env: dict[str, str] = field(default_factory=lambda: dict(AGENT_ENV))
    """The agent's own environment."""
    env_passthrough: tuple[str, ...] = ()
    stop_grace_seconds: float = 0.5
    port_free: Callable[[int], bool] = lambda _port: True
    """Ports are checked in test_rendezvous_port.py; here a port used elsewhere on this machine
    (by another test run) must not hold a worker back, unless a test says which are in use."""
    coordinators: str | None = None
    """`URL[,URL…]` the agent reports to; None: the rig's coordinator alone."""

    def build(self, scan: Callable[[], MachineReport] = machine_report) -> Agent:
        launcher = ProcessLauncher()
        self.launchers.append(launcher)
        state = StateDir(self.state_dir)
        config = RunnerConfig(
            stop_grace_seconds=self.stop_grace_seconds,
            agent_env=self.agent_env,
            env_passthrough=self.env_passthrough,
            users=self.users,
            work_root=self.work_root,
            container_runtime=lambda: self.container_runtime,
            port_free=self.port_free,
        )
        runner = Runner(state, Outbox(self.state_dir / "outbox.json"), launcher, config)
        urls = self.coordinators or self.coordinator.url
        client = CoordinatorClient(self.session, urls, "gpu-01", TOKEN)
        loop = LoopConfig(
            watch_interval_seconds=0.05, backoff_base_seconds=0.1, backoff_max_seconds=0.4
        )
        return Agent(client, runner, scan, notifier=self.notifier, config=loop)

    async def start(self) -> Agent:
        self.agent, self.stop = self.build(), asyncio.Event()
        self.task = asyncio.create_task(self.agent.run(self.stop))
        return self.agent

    async def halt(self) -> None:
        """Stop the agent as SIGTERM would: its workers keep running."""
        self.stop.set()
        if self.task is not None:
            await self.task


def kill_leftovers(rig: Harness) -> None:
    """No test leaves a worker behind, even a failing one."""
    for launcher in rig.launchers:
        for child in launcher._children.values():
            if child.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
                child.wait()
