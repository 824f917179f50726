"""Tenants on one machine (issue 25, finding 8), as real processes: a coordinator on 127.0.0.1
and a real agent whose workers are real processes. Tenant B's worker binds eleven ports of the
rendezvous range; tenant A's two-worker run still meets after one busy report, not one per port;
B's one-worker run holds no port of the range."""

from __future__ import annotations

import logging
import socket
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from .rig import Cluster, until, until_async

BARRIER = Path(__file__).resolve().parents[2] / "examples/distributed/barrier.py"
SQUATTER = (
    "import os, pathlib, socket, sys, time\n"
    "first, last = int(sys.argv[1]), int(sys.argv[2])\n"
    "held = [socket.create_server(('127.0.0.1', p)) for p in range(first, last + 1)]\n"
    "print('MASTER_PORT', os.environ['MASTER_PORT'], 'WORLD_SIZE', os.environ['WORLD_SIZE'],"
    " flush=True)\n"
    "pathlib.Path(sys.argv[3]).write_text('bound')\n"
    "while not pathlib.Path(sys.argv[4]).exists():\n"
    "    time.sleep(0.05)\n"
)
"""Tenant B's worker: binds ports FIRST-LAST, says its own MASTER_PORT, waits to be released."""
TAKEN = 11
"""Ports of the range tenant B's worker binds: 11 report intervals on the old one-per-report."""


def _free_base(width: int) -> int:
    """A base port with `width` ports after it free now (a kernel pick, re-checked)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = int(probe.getsockname()[1])
        if base + width < 65535 and all(_bindable(p) for p in range(base, base + width)):
            return base
    pytest.skip("no run of free ports found on this machine")


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("", port))
        except OSError:
            return False
    return True


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
    base = _free_base(width)
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
        await until(bound.exists, "beta's worker to bind its ports")
        assert c.store is not None
        held = c.store.database.read("SELECT name, port FROM tasks WHERE name = 'squat-0'")
        assert [(row["name"], row["port"]) for row in held] == [("squat-0", None)]
        said = str(await until_async(_logged(c, beta, "squat-0"), "beta's log")).split()
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

        assert await until_async(ended, "alpha's run to end") == "Succeeded"
        busy = [r.getMessage() for r in caplog.records if "meet-0 not started" in r.getMessage()]
        assert len(busy) == 1, busy
        assert f"its rendezvous port {base} is in use" in busy[0]
        logs = await until_async(_logged(c, alpha, "meet-0"), "alpha's worker 0 log")
        assert f"barrier at 127.0.0.1:{base + TAKEN} passed" in logs, logs
        release.write_text("")
        await until_async(lambda: _ended(c, beta), "beta's worker to end")
        assert m1.runner.ports.busy == {}
    finally:
        await c.close()


def _logged(c: Cluster, token: str, task: str) -> Callable[[], Awaitable[str]]:
    async def check() -> str:
        return str((await c.ok("GET", f"/api/v1/tasks/{task}/logs", token))["data"])

    return check


async def _ended(c: Cluster, token: str) -> bool:
    return await _state(c, token, "squat") == "Succeeded"
