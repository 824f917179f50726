"""Tenants on one machine (issue 25, finding 8), as real processes: a coordinator on 127.0.0.1
and a real agent whose workers are real processes. Tenant B's worker binds eleven ports of the
rendezvous range; tenant A's two-worker run still meets after one busy report, not one per port;
B's one-worker run holds no port of the range."""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from helpers import reserved_ports, until_async

from .rig import Cluster, worker

BARRIER = Path(__file__).resolve().parents[2] / "examples/distributed/barrier.py"
SQUATTER = (
    "import os, pathlib, socket, sys, time\n"
    "first, last = int(sys.argv[1]), int(sys.argv[2])\n"
    "held = []\n"
    "for port in range(first, last + 1):\n"
    "    try:\n"
    "        held.append(socket.create_server(('127.0.0.1', port)))\n"
    "    except OSError:\n"
    "        pass  # a connection of this busy machine has it: in use anyway\n"
    "print('MASTER_PORT', os.environ['MASTER_PORT'], 'WORLD_SIZE', os.environ['WORLD_SIZE'],"
    " flush=True)\n"
    "pathlib.Path(sys.argv[3]).write_text('bound')\n"
    "while not pathlib.Path(sys.argv[4]).exists():\n"
    "    time.sleep(0.05)\n"
)
"""Tenant B's worker: binds ports FIRST-LAST, says its own MASTER_PORT, waits to be released."""
GIB = 1024**3
TAKEN = 11
"""Ports of the range tenant B's worker binds: 11 report intervals on the old one-per-report."""


async def _state(c: Cluster, token: str, run: str) -> str:
    return str((await c.ok("GET", f"/api/v1/runs/{run}", token))["state"])


async def test_a_tenant_squatting_the_range_delays_another_by_one_report(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Beta's one-worker run binds 11 ports of the range: it holds no port itself (its
    MASTER_PORT is outside the range). Alpha's 2-worker run on the same machine is given the
    first port, finds it busy once, reports every port in use, and is given the first free one:
    one busy report (not 11), and both workers meet there."""
    width = 40
    with reserved_ports(width) as base:
        await _squatting(tmp_path, caplog, base, width)


async def _squatting(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, base: int, width: int
) -> None:
    c = Cluster(tmp_path)
    await c.start(rendezvous_ports=f"{base}-{base + width - 1}")
    try:
        caplog.set_level(logging.WARNING, logger="astraeus.agent.runtime.rendezvous_port")
        alpha = await c.workspace("alpha", ["shared"])
        beta = await c.workspace("beta", ["shared"])
        m1 = await c.machine("m1", pool="shared")
        bound, release = tmp_path / "bound", tmp_path / "release"
        squat = [sys.executable, "-S", "-c", SQUATTER, str(base), str(base + TAKEN - 1)]
        spec = {"name": "squat", "command": [*squat, str(bound), str(release)]}
        await c.ok("POST", "/api/v1/runs", beta, spec)
        await c.run_pass()
        await until_async("beta's worker to bind its ports", bound.exists)
        assert c.store is not None
        held = c.store.database.read("SELECT name, port FROM tasks WHERE name = 'squat-0'")
        assert [(row["name"], row["port"]) for row in held] == [("squat-0", None)]
        said = str(await until_async("beta's log", _logged(c, beta, "squat-0"))).split()
        assert said[2:] == ["WORLD_SIZE", "1"]
        assert not base <= int(said[1]) < base + width, said

        pair = {
            "name": "meet",
            "command": [sys.executable, str(BARRIER)],
            "requested_resources": {
                "gpu_requests": {"count": 2},
                "machines": 2,
                "node_selection": {"mode": "Any", "names": ["m1"]},
            },
        }
        await c.ok("POST", "/api/v1/runs", alpha, pair)

        async def ended() -> str | None:
            await c.run_pass()
            state = await _state(c, alpha, "meet")
            return state if state in ("Succeeded", "Failed") else None

        assert await until_async("alpha's run to end", ended) == "Succeeded"
        busy = [r.getMessage() for r in caplog.records if "meet-0 not started" in r.getMessage()]
        assert len(busy) == 1, busy
        assert f"its rendezvous port {base} is in use" in busy[0]
        logs = await until_async("alpha's worker 0 log", _logged(c, alpha, "meet-0"))
        # The first port past the squatter's, or a later one where a connection of this busy
        # machine held the next (`reserved_ports`): found in the same probe either way.
        met = re.search(r"barrier at 127\.0\.0\.1:(\d+) passed", logs)
        assert met is not None, logs
        assert base + TAKEN <= int(met[1]) < base + width
        release.write_text("")
        await until_async("beta's worker to end", lambda: _ended(c, beta))
        assert m1.runner.ports.busy == {}
    finally:
        await c.close()


def _logged(c: Cluster, token: str, task: str) -> Callable[[], Awaitable[str]]:
    async def check() -> str:
        return str((await c.ok("GET", f"/api/v1/tasks/{task}/logs", token))["data"])

    return check


async def _ended(c: Cluster, token: str) -> bool:
    return await _state(c, token, "squat") == "Succeeded"


SMALL_CPU_MACHINE = """
name = "small"
cores = 4
memory_gb = 64
"""
"""A CPU machine of 4 cores: GPU-less runs of the default ask (1 core, 2 GiB) fit four."""


async def _reason(c: Cluster, token: str, run: str) -> tuple[str, str | None]:
    found = await c.ok("GET", f"/api/v1/runs/{run}", token)
    return str(found["state"]), found.get("reason")


async def test_gpu_less_runs_cannot_stack_past_the_machines_cores(tmp_path: Path) -> None:
    """Six GPU-less runs of beta asking nothing on a 4-core machine: four run (1 core and 2 GiB
    each by default), two wait for room; a workspace's cpu_quota and memory_quota count those
    runs and hold the next ones back with the guide's quota reason."""
    description = tmp_path / "small.toml"
    description.write_text(SMALL_CPU_MACHINE)
    release = tmp_path / "release"
    c = Cluster(tmp_path)
    await c.start()
    try:
        beta = await c.workspace("beta", ["shared"])
        await c.machine("small", pool="shared", description=str(description))
        for n in range(6):
            spec = {"name": f"cpu{n}", "command": worker(f"cpu{n}", release)}
            await c.ok("POST", "/api/v1/runs", beta, spec)
        await c.run_pass()
        states = [await _reason(c, beta, f"cpu{n}") for n in range(6)]
        assert [state for state, _ in states].count("Pending") == 2, states
        held = (await c.ok("GET", "/api/v1/runs/cpu0", beta))["tasks"][0]
        assert (held["cpu_cores"], held["memory_bytes"]) == (1, 2 * GIB)
        release.write_text("")
        await until_async("the first four runs to end", lambda: _all_ended(c, beta, 4))
        await c.run_pass()
        await until_async("the last two runs to end", lambda: _all_ended(c, beta, 6))

        release.unlink()
        quota = {"pools": ["shared"], "cpu_quota": 2.5, "memory_quota": 5 * GIB}
        await c.ok("PUT", "/api/v1/workspaces/alpha", body=quota)
        made = await c.ok("POST", "/api/v1/tokens", body={"role": "member", "workspace": "alpha"})
        alpha = str(made["token"])
        listed = await c.ok("GET", "/api/v1/workspaces/alpha")
        assert (listed["cpu_quota"], listed["memory_quota"]) == (2.5, 5 * GIB)
        for n in range(3):
            spec = {"name": f"q{n}", "command": worker(f"q{n}", release)}
            await c.ok("POST", "/api/v1/runs", alpha, spec)
        big = {
            "name": "big",
            "command": worker("big", release),
            "requested_resources": {"cpu_cores": 0.5, "memory_bytes": 4 * GIB},
        }
        await c.ok("POST", "/api/v1/runs", alpha, big)
        await c.run_pass()
        assert [(await _reason(c, alpha, f"q{n}"))[0] for n in range(2)] == ["Running"] * 2
        assert await _reason(c, alpha, "q2") == (
            "Pending",
            "Waits for namespace quota: 2 of 2.5 CPU cores in use, this run needs 1 more",
        )
        assert await _reason(c, alpha, "big") == (
            "Pending",
            "Waits for namespace quota: 4 of 5 GiB of memory in use, this run needs 4 more",
        )
    finally:
        release.write_text("")
        await c.close()


async def _all_ended(c: Cluster, token: str, count: int) -> bool:
    ended = 0
    for n in range(6):
        state, _ = await _reason(c, token, f"cpu{n}")
        ended += state == "Succeeded"
    return ended >= count
