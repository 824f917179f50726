"""Coordinator benchmark: report latency under load, scheduler throughput, a 64-GPU gang.

    .venv/bin/python benchmarks/coordinator_bench.py            # the issue's sizes
    .venv/bin/python benchmarks/coordinator_bench.py --machines 500 --runs 1000 --seconds 10

The coordinator runs as a real `astraeus-coordinator` process on loopback; this script is the
agents and the users. Both share the machine, so the figures include the load generator's cost.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from astraeus.coordinator.store import Role, Store, WorkspaceSpec
from astraeus.shared import SCHEMA_VERSION, RunSpec
from astraeus.shared.clock import SystemClock

BIN = Path(sys.executable).parent / "astraeus-coordinator"


def machine_report(name: str, gpus: int = 8) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "name": name,
        "labels": {"topology.astraeus.io/rack": f"rack-{int(name[4:]) // 32}"},
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


class Coordinator:
    """A fresh database with a workspace and agent tokens, and the service over it."""

    def __init__(self, machines: int, queued: int = 0) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="astraeus-bench-"))
        store = Store.open(self.dir / "astraeus.db")
        clock = SystemClock()
        store.workspaces.put(WorkspaceSpec(name="bench"), clock.now())
        self.admin = store.tokens.create(Role.ADMIN, clock.now())[0]
        self.member = store.tokens.create(Role.MEMBER, clock.now(), workspace="bench")[0]
        self.agents = {
            f"gpu-{i:05}": store.tokens.create(Role.AGENT, clock.now(), machine=f"gpu-{i:05}")[0]
            for i in range(machines)
        }
        ask = RunSpec.model_validate(
            {"name": "r", "command": ["x"], "requested_resources": {"gpu_requests": {"count": 1}}}
        )
        for i in range(queued):  # queued before the coordinator starts
            store.runs.submit(ask.model_copy(update={"name": f"r{i}"}), "bench", clock.now())
        store.close()
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.process: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> Coordinator:
        env = {**os.environ, "ASTRAEUS_REPORT_INTERVAL_SECONDS": "10"}
        self.process = await asyncio.create_subprocess_exec(
            BIN,
            "--db",
            self.dir / "astraeus.db",
            "--state-dir",
            self.dir,
            "--listen",
            f"127.0.0.1:{self.port}",
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        self.http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=200))
        for _ in range(600):
            try:
                async with self.http.get(f"{self.base}/healthz") as response:
                    if response.status == 200:
                        return self
            except aiohttp.ClientConnectionError:
                await asyncio.sleep(0.05)
        raise RuntimeError("the coordinator did not start")

    async def __aexit__(self, *exc: object) -> None:
        await self.http.close()
        if self.process is not None:
            self.process.terminate()
            await self.process.wait()

    async def call(self, method: str, path: str, token: str, body: Any = None) -> Any:
        headers = {"Authorization": f"Bearer {token}"}
        async with self.http.request(method, self.base + path, json=body, headers=headers) as r:
            if r.status >= 300:
                raise RuntimeError(f"{method} {path}: {r.status} {await r.text()}")
            return await r.json()

    async def report(self, name: str) -> float:
        started = time.perf_counter()
        body = {"report": machine_report(name)}
        await self.call("PUT", f"/api/v1/machines/{name}/report", self.agents[name], body)
        return time.perf_counter() - started

    def placed(self) -> int:
        """Runs placed and committed so far, read from the file (a WAL reader never blocks the
        service; polling `/metrics` this often would load its event loop)."""
        with contextlib.closing(sqlite3.connect(self.dir / "astraeus.db")) as conn:
            row = conn.execute("SELECT count(*) FROM runs WHERE state != 'Pending'").fetchone()
        return int(row[0])

    async def metric(self, name: str) -> float:
        async with self.http.get(
            f"{self.base}/metrics", headers={"Authorization": f"Bearer {self.admin}"}
        ) as r:
            for line in (await r.text()).splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
        return 0.0


async def bounded(limit: int, jobs: list[Any]) -> list[Any]:
    gate = asyncio.Semaphore(limit)

    async def one(job: Any) -> Any:
        async with gate:
            return await job

    return await asyncio.gather(*(one(job) for job in jobs))


async def report_load(
    c: Coordinator, rate: float, stop: asyncio.Event
) -> list[tuple[float, float]]:
    """Every machine reports in turn, `rate` reports a second, until `stop`; each answered
    report as (when it was sent, its latency)."""
    latencies: list[tuple[float, float]] = []
    names = list(c.agents)
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


async def throughput(machines: int, runs: int, rate: float, window: float) -> None:
    print(f"== {machines} machines reporting at {rate:.0f}/s while {runs} 1-GPU runs are queued")
    c = Coordinator(machines, queued=runs)
    async with c:
        await bounded(50, [c.report(name) for name in c.agents])
        print(f"{machines} machines registered; measuring for {window:.0f} s")
        stop = asyncio.Event()
        load = asyncio.create_task(report_load(c, rate, stop))
        started = time.perf_counter()
        placed_before = c.placed()
        placed, last = 0, started
        while time.perf_counter() - started < window:
            # The queue may run dry before the window ends (the first pass, during the
            # machines' first reports, already places thousands): the rate is over the time
            # the placements took, up to the last one seen.
            await asyncio.sleep(0.25)
            now_placed = c.placed() - placed_before
            if now_placed > placed:
                placed, last = now_placed, time.perf_counter()
        elapsed = time.perf_counter() - started
        stop.set()
        latencies = await load
        pass_sum = await c.metric("astraeus_scheduler_pass_seconds_sum")
        passes = await c.metric("astraeus_scheduler_pass_seconds_count")
        left = await c.metric('astraeus_runs{state="Pending"}')
    busy = max(last - started, 1e-9)
    print(
        f"scheduler: {placed_before} runs placed before the window; in it {placed} "
        f"placed and committed in {busy:.1f} s ({placed / busy:.1f}/s); "
        f"{passes:.0f} passes took {pass_sum:.1f} s in all; {left:.0f} runs still pending"
    )
    every = [latency for _, latency in latencies]
    print(f"reports: {len(every)} answered ({len(every) / elapsed:.0f}/s), " + summary(every))
    placing = [latency for at, latency in latencies if started <= at <= last]
    if placing:
        print(f"reports sent while runs were being placed: {len(placing)}, " + summary(placing))


def summary(latencies: list[float]) -> str:
    return (
        f"p50 {percentile(latencies, 0.5) * 1000:.1f} ms, "
        f"p99 {percentile(latencies, 0.99) * 1000:.1f} ms, max {max(latencies) * 1000:.1f} ms"
    )


async def gang(machines: int) -> None:
    print(f"== a 64-GPU gang on an idle cluster of {machines} machines")
    async with Coordinator(machines) as c:
        await bounded(50, [c.report(name) for name in c.agents])
        await asyncio.sleep(1)
        spec = {
            "name": "pretrain",
            "command": ["x"],
            "requested_resources": {"gpu_requests": {"count": 64, "min_per_machine": 8}},
        }
        started = time.perf_counter()
        await c.call("POST", "/api/v1/runs", c.member, spec)
        while True:
            run = await c.call("GET", "/api/v1/runs/pretrain", c.member)
            if run["state"] != "Pending":
                break
            await asyncio.sleep(0.01)
        took = time.perf_counter() - started
    print(
        f"placed in {took * 1000:.0f} ms (submission to Running, polled every 10 ms): "
        f"{run['shape']['why']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machines", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=500.0, help="reports per second")
    parser.add_argument("--gang-machines", type=int, default=1000)
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-gang", action="store_true")
    parser.add_argument("--window", type=float, default=60.0, help="seconds of measurement")
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    if not args.skip_gang:
        asyncio.run(gang(args.gang_machines))
    if not args.skip_throughput:
        asyncio.run(throughput(args.machines, args.runs, args.rate, args.window))


if __name__ == "__main__":
    main()
