"""Console benchmark: the cluster map, the machines table and a filter keystroke at cluster size.

    .venv/bin/python benchmarks/console_bench.py                  # 1000 and 5000 machines
    .venv/bin/python benchmarks/console_bench.py --machines 300 --repeat 1
    .venv/bin/python benchmarks/console_bench.py --smoke          # 40 machines, once

A coordinator with the console runs in this process on 127.0.0.1. N machines with 8 GPUs each
report through the agents' API: two sites (and a few machines known only by their network),
InfiniBand fabrics, RoCE, Ethernet, NVLink domains, racks of 8; 1 % of GPUs at risk, 0.2 %
faulted, 1 % of machines cordoned, 0.5 % under memory pressure, 0.5 % Down; runs of two
workspaces hold about half the GPUs; one more run waits (no machine has room). Debian's Chromium,
headless and driven by Playwright, opens the pages as an admin.

For each size it prints, as medians of `--repeat` fresh page loads:
- `GET /api/v1/cluster/map`: its size and the server's time to answer;
- the map: from navigation to the map drawn (canvas filled) and painted (that frame on screen);
- the machines table: from navigation to its first rows painted, and the time to fit its
  columns to every row's texts (done at each refresh);
- a filter keystroke: from the `input` event to the filtered rows painted, for each character
  typed into the name search and a column filter (median and slowest);
- hover: the map's hit test for a pointer position;
- the waiting run's page: from navigation to its map (closest ringed) painted.
Then the load average and the machine. Needs `.ci/console-deps`.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp.test_utils import TestServer
from playwright.async_api import Page, async_playwright

from astraeus.coordinator.api import RECORDS, SCHEDULER, create_app
from astraeus.coordinator.console import setup_console
from astraeus.coordinator.settings import Settings
from astraeus.coordinator.store import Role, Store
from astraeus.shared import SCHEMA_VERSION
from astraeus.shared.admin import WorkspaceSpec
from astraeus.shared.clock import SystemClock

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
ARGS += ["--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
H100 = "NVIDIA H100 80GB HBM3"
SITE, RACK, FABRIC = ("topology.astraeus.io/" + k for k in ("site", "rack", "fabric"))
RISK = {"kind": "pcie_replay", "message": "PCIe replays: 41/min, above 31/min for Gen5 x16"}
FAULT = {"kind": "xid", "message": "Xid 79: GPU has fallen off the bus"}
TYPED = (("#machine-search", "gpu-12"), ('input[data-filter="fabric"]', "ib-1"))
"""Typed a character at a time: the name search, then the Fabric column's filter."""


def machine_report(i: int) -> dict[str, Any]:
    """Machine `i` of the benchmark cluster: its kind of network, health and pressure vary with
    `i`, always the same way."""
    name = f"gpu-{i:04d}"
    kind = i % 10
    labels = {RACK: f"rack-{i // 8}"}
    if i % 50 != 7:  # 2 % have no site label: their site is the network they connect from
        labels[SITE] = "ams-1" if i % 3 == 0 else "fra-1"
    if kind < 6:
        labels[FABRIC] = f"ib-{(i // 400) % 2}"
    gpus = []
    for g in range(8):
        gpu: dict[str, Any] = {
            "index": g,
            "uuid": f"GPU-{name}-{g}",
            "vendor": "nvidia",
            "model": H100,
            "memory_bytes": 85520809984,
        }
        if kind == 9:
            gpu["nvlink_domain"] = f"5d1c7a3e-0b4f-4f7e-9a53-{i // 9:012d}/1"
        serial = i * 8 + g
        if serial % 100 == 13:
            gpu["health"] = {"state": "at_risk", "signals": [RISK]}
        elif serial % 500 == 77:
            gpu["health"] = {"state": "faulted", "signals": [FAULT]}
        gpus.append(gpu)
    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "name": name,
        "labels": labels,
        "cpu_cores": 128,
        "memory_bytes": 2 * 1024**4,
        "gpus": gpus,
        "rdma_ports": ports(kind, labels.get(FABRIC)),
    }
    if i % 200 == 3:
        report["conditions"] = ["MemoryPressure"]
    return report


def ports(kind: int, fabric: str | None) -> list[dict[str, Any]]:
    if kind >= 8:
        return []
    layer = "InfiniBand" if kind < 6 else "Ethernet"
    port = {"device": "mlx5_0", "port": 1, "state": "ACTIVE", "link_layer": layer}
    return [{**port, "rate_gbps": 400, "fabric": fabric if layer == "InfiniBand" else None}]


@dataclass
class Bench:
    server: TestServer
    store: Store
    admin: str

    def url(self, path: str) -> str:
        return str(self.server.make_url(path))


async def cluster(machines: int, root: Path) -> Bench:
    """A served coordinator whose machines report; runs holding about half the GPUs; `waiting`."""
    settings = Settings(db=root / "astraeus.db", state_dir=root, scheduler=False)
    settings = Settings(**{**settings.__dict__, "down_after_seconds": 3600})
    store = Store.open(settings.db)
    clock = SystemClock()
    members = {}
    for workspace in ("vision", "speech"):
        # No pools: every machine is the workspaces' (an agent's `pool` label is ignored; pools
        # are set by admins, and 5,000 label requests would only slow the set-up).
        store.workspaces.put(WorkspaceSpec(name=workspace, pools=[]), clock.now())
        members[workspace] = store.tokens.create(Role.MEMBER, clock.now(), workspace=workspace)[0]
    admin = store.tokens.create(Role.ADMIN, clock.now())[0]
    app = create_app(settings, store=store, clock=clock)
    setup_console(app)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    bench = Bench(server, store, admin)
    async with aiohttp.ClientSession() as session:
        await report_all(bench, session, machines, clock)
        await fill(bench, session, members, machines)
    # As the service does after each pass (docs/coordinator.md): what lives on, 5,000 parsed
    # reports mostly, leaves the collector's sight, or its full passes stall every request.
    gc.freeze()
    return bench


async def report_all(
    bench: Bench, session: aiohttp.ClientSession, machines: int, clock: SystemClock
) -> None:
    for i in range(machines):
        name = f"gpu-{i:04d}"
        bench.server.app[RECORDS].ensure(name, clock.now())
        if i % 200 == 11:
            continue  # never reports: Down
        agent = bench.store.tokens.create(Role.AGENT, clock.now(), machine=name)[0]
        body = {"report": machine_report(i), "updates": [], "logs": []}
        headers = {"Authorization": f"Bearer {agent}"}
        url = bench.url(f"/api/v1/machines/{name}/report")
        async with session.put(url, json=body, headers=headers) as response:
            if response.status != 200:
                raise RuntimeError(await response.text())
        if i % 100 == 5:
            cordon = f"/api/v1/machines/{name}/cordon"
            await call(bench, session, "POST", cordon, bench.admin, {"reason": "firmware update"})


async def call(
    bench: Bench, session: aiohttp.ClientSession, method: str, path: str, token: str, body: Any
) -> Any:
    headers = {"Authorization": f"Bearer {token}"}
    async with session.request(method, bench.url(path), json=body, headers=headers) as response:
        if response.status >= 400:
            raise RuntimeError(await response.text())
        return await response.json()


async def fill(
    bench: Bench, session: aiohttp.ClientSession, members: dict[str, str], machines: int
) -> None:
    """Runs of 8 and 64 GPUs from both workspaces until about half the GPUs are held, then one
    run that must wait (each machine is short of room or of something else)."""
    runs = machines * 8 // 2 // 64
    for n in range(runs):
        workspace = "vision" if n % 2 else "speech"
        for size, suffix in ((64, "big"), *(((8, f"s{k}")) for k in range(4))):
            if size == 8 and n % 2:
                continue
            spec: dict[str, Any] = {"name": f"{suffix}-{n}", "command": ["sleep", "1d"]}
            spec["requested_resources"] = {"gpu_requests": {"count": size}}
            await call(bench, session, "POST", "/api/v1/runs", members[workspace], spec)
    waiting: dict[str, Any] = {"name": "waiting", "command": ["true"]}
    waiting["requested_resources"] = {"gpu_requests": {"count": 16, "min_per_machine": 16}}
    await call(bench, session, "POST", "/api/v1/runs", members["vision"], waiting)
    started = time.perf_counter()
    idle = 0
    while idle < 3:  # a pass may place nothing while another is still cut short: try again
        result = await bench.server.app[SCHEDULER].run_pass()
        idle = 0 if result.placed else idle + 1
    held = await call(bench, session, "GET", "/api/v1/cluster/map", bench.admin, None)
    in_use = sum(1 for m in held["machines"] for g in m["gpus"] if g[3] is not None)
    took = time.perf_counter() - started
    print(f"  cluster ready: {in_use} of {machines * 8} GPUs in use, placed in {took:.0f} s")


async def answer_time(bench: Bench, repeat: int) -> tuple[float, int]:
    """Median seconds for `GET /api/v1/cluster/map` as an admin, and its size in bytes."""
    times: list[float] = []
    size = 0
    async with aiohttp.ClientSession() as session:
        for _ in range(repeat):
            start = time.perf_counter()
            headers = {"Authorization": f"Bearer {bench.admin}"}
            async with session.get(bench.url("/api/v1/cluster/map"), headers=headers) as got:
                size = len(await got.read())
            times.append(time.perf_counter() - start)
    return statistics.median(times), size


async def painted(page: Page, url: str, mark: str) -> tuple[float, float]:
    """Open `url` as a fresh page load; ms from navigation to `astraeus:<mark>-drawn` and to
    `-painted`."""
    await page.goto("about:blank")
    await page.goto(url)
    await page.wait_for_function(
        "(name) => performance.getEntriesByName(name).length > 0",
        arg=f"astraeus:{mark}-painted",
        timeout=300_000,
    )
    drawn, shown = await page.evaluate(
        """(mark) => ['drawn', 'painted'].map((w) =>
            performance.getEntriesByName(`astraeus:${mark}-${w}`)[0].startTime)""",
        mark,
    )
    return float(drawn), float(shown)


# Each keystroke: ms from the input event to the task after the next frame (the rows rendered),
# and the part spent in the input handler itself (filtering and drawing the rows in view).
TYPE = """async ([selector, text]) => {
  const input = document.querySelector(selector);
  const frame = () => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
  const each = [];
  const work = [];
  for (const ch of text) {
    const start = performance.now();
    input.value += ch;
    input.dispatchEvent(new Event("input"));
    work.push(performance.now() - start);
    await frame();
    each.push(performance.now() - start);
  }
  input.value = "";
  input.dispatchEvent(new Event("input"));
  await frame();
  return [each, work];
}"""

FIT = """() => import("/console/vtable.js").then(({ fitColumns }) => {
  const table = document.querySelector("#machines-table");
  const rows = document.querySelector(".machines-view").view.all;
  const start = performance.now();
  for (let i = 0; i < 5; i += 1) fitColumns(table, rows);
  return (performance.now() - start) / 5;
})"""
"""ms to measure the machines table's column widths from every row's texts (each refresh)."""

HIT = """() => {
  const map = document.querySelector("#cluster-map");
  return import("/console/mapmodel.js").then(({ hitTest }) => {
    const model = map.mapModel;
    const start = performance.now();
    let found = 0;
    for (let i = 0; i < 10000; i += 1) {
      if (hitTest(model, (i * 7919) % model.width, (i * 104729) % model.height)) found += 1;
    }
    return (performance.now() - start) / 10000;
  });
}"""


async def measure(machines: int, repeat: int) -> None:
    print(f"{machines} machines:")
    with tempfile.TemporaryDirectory() as root:
        bench = await cluster(machines, Path(root))
        seconds, size = await answer_time(bench, repeat)
        base = bench.url("/console/")
        async with async_playwright() as driver:
            browser = await driver.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            page = await browser.new_page(viewport={"width": 1280, "height": 1000})
            await page.goto(base)
            await page.evaluate(
                """(t) => { sessionStorage.setItem('astraeus.token', t);
                sessionStorage.setItem('astraeus.role', 'admin');
                sessionStorage.setItem('astraeus.workspace', 'vision'); }""",
                bench.admin,
            )
            maps = [await painted(page, base + "#/map", "map") for _ in range(repeat)]
            hit = await page.evaluate(HIT)
            tables = [await painted(page, base + "#/machines", "table") for _ in range(repeat)]
            fit = await page.evaluate(FIT)
            keys: list[float] = []
            applied: list[float] = []
            for _ in range(repeat):
                for selector, text in TYPED:
                    each, work = await page.evaluate(TYPE, [selector, text])
                    keys += each
                    applied += work
            runs = [await painted(page, base + "#/runs/waiting", "map") for _ in range(repeat)]
            await browser.close()
        await bench.server.close()
        bench.store.close()
    print(f"  GET /api/v1/cluster/map: {size / 1024:.0f} KiB, answered in {seconds * 1000:.0f} ms")
    print(f"  map: drawn {med(maps, 0)}, painted {med(maps, 1)} after navigation")
    print(f"  machines table: first rows painted {med(tables, 1)} after navigation")
    print(f"  machines table: columns fitted to {machines} rows' texts in {fit:.1f} ms")
    print(
        f"  filter keystroke: rows painted after median {statistics.median(keys):.0f} ms, "
        f"slowest {max(keys):.0f} ms; of that, filtering and drawing the rows median "
        f"{statistics.median(applied):.1f} ms, slowest {max(applied):.1f} ms "
        f"({len(keys)} keystrokes)"
    )
    print(f"  map hover hit test: {hit * 1000:.1f} µs")
    print(f"  waiting run's page: its map painted {med(runs, 1)} after navigation")
    print(f"  load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def med(pairs: list[tuple[float, float]], at: int) -> str:
    return f"{statistics.median(p[at] for p in pairs):.0f} ms"


def describe_machine() -> str:
    model = ""
    with open("/proc/cpuinfo", encoding="utf-8") as info:
        for line in info:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    chromium = subprocess.run(
        ["/usr/bin/chromium", "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return f"{os.cpu_count()} CPUs ({model}), Python {platform.python_version()}, {chromium}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machines", type=int, action="append")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="40 machines, once: that it runs (the suite's smoke test)",
    )
    args = parser.parse_args()
    if args.smoke:
        args.machines, args.repeat = [40], 1
    print(describe_machine())
    for machines in args.machines or [1000, 5000]:
        asyncio.run(measure(machines, args.repeat))
    return 0


if __name__ == "__main__":
    sys.exit(main())
