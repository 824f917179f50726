"""The coordinator under benchmark: a real `astraeus-coordinator` process on loopback over a
fresh SQLite file (or a fresh PostgreSQL database), with its machines (and optionally a queue)
stored before it starts, and the agents and users that talk to it. Used by
`coordinator_bench.py`.

Machines are stored through the coordinator's own report path (`Reports.receive`, what an agent's
first report does), so the service starts with every machine Up and no registration burst. On
PostgreSQL the same file is moved into a template database once (`migrate --to`,
`store/transfer.py`), and each coordinator starts on a copy of it (`CREATE DATABASE ... TEMPLATE`),
as each SQLite coordinator starts on a copy of the file.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import shutil
import socket
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import aiohttp

from astraeus.coordinator.machine_records import MachineRecords
from astraeus.coordinator.reports import Reports
from astraeus.coordinator.scheduler.port_grants import Ports
from astraeus.coordinator.settings import Settings
from astraeus.coordinator.store import Role, Store
from astraeus.coordinator.store.dialect import PgConnection, pg_connect
from astraeus.coordinator.store.transfer import migrate
from astraeus.shared import SCHEMA_VERSION, AgentReport, RunSpec
from astraeus.shared.admin import WorkspaceSpec
from astraeus.shared.clock import SystemClock

BIN = Path(sys.executable).parent / "astraeus-coordinator"
_RUNS = itertools.count(1)
"""Numbers the coordinators' PostgreSQL databases."""
ASTRA = Path(sys.executable).parent / "astra"


def machine_report(name: str, gpus: int = 8) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "name": name,
        "labels": {"topology.astraeus.io/rack": f"rack-{int(name.rsplit('-', 1)[1]) // 32}"},
        "cpu_cores": 128,
        "memory_bytes": 2 * 1024**4,
        "gpus": [
            {
                "index": i,
                "uuid": f"GPU-{name}-{i}",
                "vendor": "nvidia",
                "model": "NVIDIA H100 80GB HBM3",
                "memory_bytes": 85520809984,
            }
            for i in range(gpus)
        ],
    }


ONE_GPU = {"name": "r", "command": ["x"], "requested_resources": {"gpu_requests": {"count": 1}}}
GANG = {"name": "g", "command": ["x"], "requested_resources": {"gpu_requests": {"count": 64}}}
NEVER = {
    "name": "n",
    "command": ["x"],
    "requested_resources": {"gpu_requests": {"count": 16, "min_per_machine": 16}},
}
"""A run no machine can take (16 GPUs on one machine of 8): every machine is checked and
explained."""


class Cluster:
    """A database file with a workspace, tokens and `machines` machines that have reported;
    copied for each coordinator started on it, so every repetition starts from the same file.
    With a PostgreSQL `server` (`tests/pg_server.py`'s), the file is also moved into a template
    database of it, which each coordinator's database is copied from."""

    def __init__(
        self, machines: int, queued: int = 0, server: Any = None, *, waiting: int = 0
    ) -> None:
        """`queued` 1-GPU runs (placed once the coordinator starts) and `waiting` runs no
        machine can take (`NEVER`: they stay queued, as a busy cluster's queue does)."""
        self.dir = Path(tempfile.mkdtemp(prefix="astraeus-bench-"))
        self.db = self.dir / "template.db"
        self.admin = self.member = ""
        self.agents: dict[str, str] = {}
        self.server = server
        self.template = ""
        """The template database's name (PostgreSQL only)."""
        # In a thread of its own, with its own event loop: a benchmark makes its cluster from
        # inside one, and the file is opened, filled and closed by that one thread.
        with ThreadPoolExecutor(1) as filling:
            filling.submit(asyncio.run, self._fill(machines, queued, waiting)).result()
        if server is not None:
            url = server.create_database("bench")
            migrate(self.db, url)
            self.template = url.rpartition("/")[2]

    @property
    def store(self) -> str:
        return "sqlite" if self.server is None else "postgresql"

    async def _fill(self, machines: int, queued: int, waiting: int) -> None:
        store = Store.open(self.db)
        clock = SystemClock()
        store.workspaces.put(WorkspaceSpec(name="bench"), clock.now())
        self.admin = store.tokens.create(Role.ADMIN, clock.now())[0]
        self.member = store.tokens.create(Role.MEMBER, clock.now(), workspace="bench")[0]
        records = MachineRecords(store)
        reports = Reports(store, records, Ports(Settings().port_range))
        agents = {}
        for i in range(machines):
            name = f"gpu-{i:05}"
            records.ensure(name, clock.now())
            agents[name] = store.tokens.create(Role.AGENT, clock.now(), machine=name)[0]
            body = AgentReport.model_validate({"report": machine_report(name)})
            await reports.receive(body, "127.0.0.1", clock.now())
        ask = RunSpec.model_validate(ONE_GPU)
        for i in range(queued):
            store.runs.submit(ask.model_copy(update={"name": f"q{i}"}), "bench", clock.now())
        never = RunSpec.model_validate(NEVER)
        for i in range(waiting):
            store.runs.submit(never.model_copy(update={"name": f"w{i}"}), "bench", clock.now())
        store.close()
        self.agents = agents

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        if self.template:
            self.server.admin(f"DROP DATABASE {self.template} WITH (FORCE)")


class Coordinator:
    """The service started on a copy of a `Cluster`'s file; `async with` starts and stops it."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        launch: Sequence[str] = (str(BIN),),
        start_seconds: float = 60.0,
        **env: str,
    ) -> None:
        """`launch`: the command that starts the service (the `astraeus-coordinator` entry point
        by default; `soak_bench.py --trace` starts it under tracemalloc, whose imports alone
        took 25 s to over a minute on a loaded 2-core machine: give it `start_seconds`)."""
        self.cluster = cluster
        self.launch = tuple(launch)
        self.start_seconds = start_seconds
        self.dir = Path(tempfile.mkdtemp(prefix="run-", dir=cluster.dir))
        self.db = self.dir / "astraeus.db"
        self.url = ""
        """The coordinator's PostgreSQL database, when the cluster is on PostgreSQL."""
        if cluster.server is None:
            shutil.copy(cluster.db, self.db)
            where = ["--db", str(self.db)]
        else:
            name = f"run_{os.getpid()}_{next(_RUNS)}"
            cluster.server.admin(f"CREATE DATABASE {name} TEMPLATE {cluster.template}")
            self.url = cluster.server.url(name)
            where = ["--database-url", self.url]
        self.where = where
        # The port stays held (bound with SO_REUSEADDR, not listening) until __aexit__: the
        # service, which binds with SO_REUSEADDR too, listens there; no other program can.
        self.held = socket.socket()
        self.held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.held.bind(("127.0.0.1", 0))
        self.port = self.held.getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "ASTRAEUS_REPORT_INTERVAL_SECONDS": "10",
            # Machines the script does not report for stay Up: silence is not under test.
            "ASTRAEUS_DOWN_AFTER_SECONDS": "3600",
            "ASTRAEUS_LOST_AFTER_SECONDS": "7200",
            **env,
        }
        self.process: asyncio.subprocess.Process | None = None
        self.launched = self.ready = 0.0
        self.reader: Any = (
            PgConnection(pg_connect(self.url, application="benchmark"))
            if self.url
            else sqlite3.connect(self.db, check_same_thread=False)
        )

    async def __aenter__(self) -> Coordinator:
        self.launched = time.perf_counter()
        """When the process was started: `start → first placement` counts from here."""
        self.process = await asyncio.create_subprocess_exec(
            *self.launch,
            *self.where,
            "--state-dir",
            self.dir,
            "--listen",
            f"127.0.0.1:{self.port}",
            env=self.env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        self.http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=200))
        for _ in range(int(self.start_seconds / 0.05)):
            with contextlib.suppress(aiohttp.ClientConnectionError):
                async with self.http.get(f"{self.base}/healthz") as response:
                    if response.status == 200:
                        self.ready = time.perf_counter()
                        return self
            await asyncio.sleep(0.05)
        # `async with` calls no __aexit__ when __aenter__ raises: stop the process here, or it
        # outlives the benchmark (and loads the machine for every figure after it).
        await self.__aexit__()
        raise RuntimeError(f"the coordinator did not start in {self.start_seconds:g} s")

    async def __aexit__(self, *exc: object) -> None:
        await self.http.close()
        self.reader.close()
        if self.process is not None:
            self.process.terminate()
            await self.process.wait()
        self.held.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        if self.url:
            name = self.url.rpartition("/")[2]
            self.cluster.server.admin(f"DROP DATABASE {name} WITH (FORCE)")

    async def call(self, method: str, path: str, token: str, body: Any = None) -> Any:
        headers = {"Authorization": f"Bearer {token}"}
        async with self.http.request(method, self.base + path, json=body, headers=headers) as r:
            if r.status >= 300:
                raise RuntimeError(f"{method} {path}: {r.status} {await r.text()}")
            return await r.json()

    async def report(self, name: str) -> float:
        started = time.perf_counter()
        body = {"report": machine_report(name)}
        token = self.cluster.agents[name]
        await self.call("PUT", f"/api/v1/machines/{name}/report", token, body)
        return time.perf_counter() - started

    def count(self, sql: str, params: tuple[object, ...] = ()) -> int:
        """A count read from the database (a WAL reader never blocks the service, nor does a
        PostgreSQL session; polling the API this often would load its event loop)."""
        return int(self.reader.execute(sql, params).fetchone()[0])

    def placed(self) -> int:
        return self.count("SELECT count(*) FROM runs WHERE state != 'Pending'")

    def rss(self) -> dict[str, int]:
        """Resident memory now and at its peak, of the service and of its pass worker."""
        assert self.process is not None  # noqa: S101 - started
        found = {"service": _rss(self.process.pid)}
        for child in _children(self.process.pid):
            found["worker"] = _rss(child)
        return found

    async def first_pass(self, seconds: float = 120.0) -> float:
        """Wait until the service's first pass has ended (on a loaded machine it took 7-11 s
        at 5,000 machines, where a fixed 3 s wait assumed it over); the seconds waited."""
        started = time.perf_counter()
        while not await self.metric("astraeus_scheduler_pass_seconds_count"):
            if time.perf_counter() - started > seconds:
                raise RuntimeError(f"no pass ended in {seconds:g} s")
            await asyncio.sleep(0.25)
        return time.perf_counter() - started

    async def metric(self, name: str) -> float:
        async with self.http.get(
            f"{self.base}/metrics", headers={"Authorization": f"Bearer {self.cluster.admin}"}
        ) as r:
            for line in (await r.text()).splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
        return 0.0


def _rss(pid: int) -> int:
    """VmRSS in bytes (0 when the process is gone)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            text = (task / "children").read_text().split()
            found += [int(child) for child in text]
    return found


async def report_load(
    c: Coordinator, rate: float, stop: asyncio.Event
) -> list[tuple[float, float]]:
    """Every machine reports in turn, `rate` reports a second, until `stop`; each answered
    report as (when it was due, its latency)."""
    latencies: list[tuple[float, float]] = []
    names = list(c.cluster.agents)
    started = time.perf_counter()
    pending: set[asyncio.Task[float]] = set()
    sent = 0
    while not stop.is_set():
        due = started + sent / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        task = asyncio.create_task(c.report(names[sent % len(names)]))
        task.add_done_callback(
            lambda t, at=due: latencies.append((at, t.result())) if not t.exception() else None
        )
        pending.add(task)
        task.add_done_callback(pending.discard)
        sent += 1
    await asyncio.gather(*pending, return_exceptions=True)
    return latencies


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)] if ordered else float("nan")


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


async def three(
    label: str, unit: str, repeat: int, once: Callable[[int], Awaitable[float]]
) -> float:
    """Run `once` `repeat` times, print each figure with the load average, then the median."""
    figures = []
    for i in range(repeat):
        figure = await once(i)
        figures.append(figure)
        print(f"  {label} run {i + 1}: {figure:.1f} {unit} ({load()})", flush=True)
    median = statistics.median(figures)
    spread = ", ".join(f"{f:.1f}" for f in figures)
    print(f"{label}: median {median:.1f} {unit} of [{spread}]", flush=True)
    return median
