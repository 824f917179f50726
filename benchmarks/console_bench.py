"""Console benchmark: how long the run page and the machines page take to show a large cluster.

    .venv/bin/python benchmarks/console_bench.py                  # 100 and 1000 machines
    .venv/bin/python benchmarks/console_bench.py --machines 300

A coordinator with the console runs in this process on 127.0.0.1; Debian's Chromium, headless and
driven by Playwright, opens the pages. For each size it prints the size of the waiting run's JSON
(its explanation lists every machine), the time from opening the run page to every machine's row
of "Why it is not running yet" being drawn, the machines page's time to draw every card (GPU
models and health counts included) from the list, the time to show one machine's GPU table once
its section is opened (its one detail request), and New run's time to the form and to its GPU
model list. Medians of `--repeat` loads. Needs `.ci/console-deps`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp.test_utils import TestServer
from playwright.async_api import Page, async_playwright

from astraeus.coordinator.api import SCHEDULER, create_app
from astraeus.coordinator.clock import SystemClock
from astraeus.coordinator.console import setup_console
from astraeus.coordinator.settings import Settings
from astraeus.coordinator.store import Role, Store, WorkspaceSpec
from astraeus.shared import SCHEMA_VERSION

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
ARGS += ["--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


def machine_report(name: str) -> dict[str, Any]:
    gpus = [
        {
            "index": i,
            "uuid": f"GPU-{name}-{i}",
            "vendor": "nvidia",
            "model": "NVIDIA H100 80GB HBM3",
            "memory_bytes": 85520809984,
        }
        for i in range(8)
    ]
    labels = {"topology.astraeus.io/rack": f"rack-{int(name[4:]) // 32}"}
    return {
        "schema_version": SCHEMA_VERSION,
        "name": name,
        "labels": labels,
        "cpu_cores": 128,
        "memory_bytes": 2 * 1024**4,
        "gpus": gpus,
    }


async def cluster(machines: int, root: Path) -> tuple[TestServer, Store, str]:
    """A served coordinator whose `machines` machines report, and one run none can take."""
    settings = Settings(db=root / "astraeus.db", state_dir=root, scheduler=False)
    settings = Settings(**{**settings.__dict__, "down_after_seconds": 3600})
    store = Store.open(settings.db)
    clock = SystemClock()
    store.workspaces.put(WorkspaceSpec(name="bench"), clock.now())
    member = store.tokens.create(Role.MEMBER, clock.now(), workspace="bench")[0]
    app = create_app(settings, store=store, clock=clock)
    setup_console(app)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    async with aiohttp.ClientSession() as session:
        for i in range(machines):
            name = f"gpu-{i:04d}"
            store.machines.ensure(name, clock.now())
            agent = store.tokens.create(Role.AGENT, clock.now(), machine=name)[0]
            body = {"report": machine_report(name), "updates": [], "logs": []}
            headers = {"Authorization": f"Bearer {agent}"}
            url = server.make_url(f"/api/v1/machines/{name}/report")
            async with session.put(url, json=body, headers=headers) as response:
                if response.status != 200:
                    raise RuntimeError(await response.text())
        spec = {"name": "huge", "command": ["true"]}
        spec["requested_resources"] = {"gpu_requests": {"count": 16, "min_per_machine": 16}}
        headers = {"Authorization": f"Bearer {member}"}
        async with session.post(server.make_url("/api/v1/runs"), json=spec, headers=headers):
            pass
        await app[SCHEDULER].run_pass()
        async with session.get(server.make_url("/api/v1/runs/huge"), headers=headers) as got:
            print(f"  GET /api/v1/runs/huge: {len(await got.read()) / 1024:.0f} KiB")
    return server, store, member


async def timed(page: Page, url: str, selector: str, count: int) -> float:
    """Seconds from opening `url` to `count` elements matching `selector`."""
    await page.goto("about:blank")
    start = time.perf_counter()
    await page.goto(url)
    await page.wait_for_function(
        "([s, n]) => document.querySelectorAll(s).length >= n",
        arg=[selector, count],
        timeout=300_000,
    )
    return time.perf_counter() - start


async def open_one(page: Page, base: str) -> float:
    """Seconds from opening the first machine's GPU section to its GPU rows being drawn."""
    await timed(page, base + "#/machines", "section.machine", 1)
    first = page.locator("details.gpus summary").first
    start = time.perf_counter()
    await first.click()
    await page.wait_for_selector("details.gpus[open] tr[data-gpu]", timeout=300_000)
    return time.perf_counter() - start


async def measure(machines: int, repeat: int) -> None:
    print(f"{machines} machines:")
    with tempfile.TemporaryDirectory() as root:
        server, store, member = await cluster(machines, Path(root))
        base = str(server.make_url("/console/"))
        async with async_playwright() as driver:
            browser = await driver.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            page = await browser.new_page()
            await page.goto(base)
            await page.evaluate("(t) => sessionStorage.setItem('astraeus.token', t)", member)
            run_page = [
                await timed(page, base + "#/runs/huge", "#why-machines tbody tr", machines)
                for _ in range(repeat)
            ]
            cards = [
                await timed(page, base + "#/machines", "section.machine", machines)
                for _ in range(repeat)
            ]
            gpus = [await open_one(page, base) for _ in range(repeat)]
            form = [await timed(page, base + "#/new", "#new-run", 1) for _ in range(repeat)]
            models = [
                await timed(page, base + "#/new", "#model[data-loaded]", 1) for _ in range(repeat)
            ]
            await browser.close()
        await server.close()
        store.close()
    print(f"  run page, every machine's reason drawn: {ms(run_page)}")
    print(f"  machines page, every card drawn from the list: {ms(cards)}")
    print(f"  machines page, one machine's GPU table after opening it: {ms(gpus)}")
    print(f"  New run form drawn: {ms(form)}; its GPU model list filled: {ms(models)}")


def ms(seconds: list[float]) -> str:
    return f"{statistics.median(seconds) * 1000:.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machines", type=int, action="append")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for machines in args.machines or [100, 1000]:
        asyncio.run(measure(machines, args.repeat))


if __name__ == "__main__":
    sys.exit(main())
