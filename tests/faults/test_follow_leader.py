"""Clients follow the leader by themselves (issue 27.3), with no load balancer: two coordinators
on one PostgreSQL database, agents given both addresses (`--coordinator A,B`) and `astra` given
both (`ASTRA_API=A,B`). The leader killed with SIGKILL: the agents report to the standby once it
leads, their worker runs on as the same task (never Lost), `astra` reaches the new leader past
the dead address, and once the old leader is back as a standby, past its standby answer; a
browser opening the standby's console is sent to the leader's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import until

from .rig import AGENT_ENV, BIN, Coordinator, Process
from .test_leader import ENV, _get, _health, _pair, _stop

pytestmark = pytest.mark.slow  # two coordinators, two agents, a takeover


@pytest.fixture
def pair(tmp_path: Path, postgresql_url: str) -> Iterator[list[Coordinator]]:
    yield from _pair(tmp_path, postgresql_url, ENV)


def _astra(root: Path, api: str, token: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """`astra` as a member would run it, given every coordinator's address."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "ASTRA_CONFIG": str(root / "none.toml"),
        "ASTRA_API": api,
        "ASTRA_TOKEN": token,
    }
    return subprocess.run(
        [str(BIN / "astra"), *argv], capture_output=True, text=True, env=env, timeout=60,
        check=False,
    )  # fmt: skip


def _run(c: Coordinator, token: str, name: str) -> dict[str, Any]:
    status, body, _ = _get(c.url + f"/api/v1/runs/{name}", token)
    assert status == 200, body
    return dict(body)


def test_agents_and_astra_follow_the_leader_by_themselves(
    tmp_path: Path, pair: list[Coordinator]
) -> None:
    a, b = pair  # a leads, b stands by
    a.ok("PUT", "/api/v1/workspaces/vision", {})
    member = a.ok("POST", "/api/v1/tokens", {"role": "member", "workspace": "vision"})["token"]
    both = f"{a.url},{b.url}"
    agents: list[Process] = []
    try:
        for name in ("node-a", "node-b"):
            secret = a.ok("POST", "/api/v1/tokens", {"role": "agent", "machine": name})["token"]
            (tmp_path / f"{name}.token").write_text(secret)
            argv = [
                str(BIN / "astraeus-agent"), "run", "--coordinator", f"{b.url},{a.url}",
                "--token-file", str(tmp_path / f"{name}.token"), "--name", name,
                "--backend", "fake:h100-sxm", "--state-dir", str(tmp_path / name),
            ]  # fmt: skip
            agents.append(Process(argv, tmp_path / f"{name}.log", AGENT_ENV))
        # Both agents were given the standby first: they found the leader past its answer.
        until("both machines Up at the leader", lambda: _up(a) == 2)

        submitted = _astra(
            tmp_path, both, member, "astraeus", "run", "--name", "long", "--gpus", "8",
            "--", "/bin/sleep", "600",
        )  # fmt: skip
        assert submitted.returncode == 0, submitted.stderr
        task = until("long's worker to run", lambda: _task(a, member, "long", "Running"))

        a.kill()
        until("b to lead", lambda: _health(b) == 200)
        until("both machines Up at b", lambda: _up(b) == 2)
        for agent in agents:
            until(
                "the agent to say it reports to b",
                lambda agent=agent: f"now reporting to {b.url}" in agent.output,  # type: ignore[misc]
            )
        seen = _run(b, member, "long")["tasks"][0]
        assert (seen["state"], seen["machine"], seen["started_at"]) == (
            "Running",
            task["machine"],
            task["started_at"],
        )

        # astra: a's address refuses (killed), b answers as the leader.
        roles = _astra(tmp_path, both, "", "astraeus", "coordinators", "-o", "json")
        assert roles.returncode == 0, roles.stderr
        assert [(r["coordinator"], r["role"][:11]) for r in json.loads(roles.stdout)] == [
            (a.url, "unreachable"),
            (b.url, "leader"),
        ]
        status = _astra(tmp_path, both, member, "astraeus", "status", "long", "-o", "json")
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["state"] == "Running"

        # a back, as a standby naming b: astra, given a first, goes past its answer.
        a.start(ENV, ready=False)
        until("a to stand by", lambda: _health(a) == 503)
        _, health, _ = _get(a.url + "/healthz")
        assert (health["status"], health["leader"]) == ("standby", b.url)
        roles = _astra(tmp_path, both, "", "astraeus", "coordinators", "-o", "json")
        assert json.loads(roles.stdout) == [
            {"coordinator": a.url, "role": "standby", "leader": b.url, "epoch": 2},
            {"coordinator": b.url, "role": "leader", "leader": b.url, "epoch": None},
        ]
        second = _astra(
            tmp_path, both, member, "astraeus", "run", "--name", "next", "--gpus", "8",
            "--", "/bin/sleep", "600",
        )  # fmt: skip
        assert second.returncode == 0, second.stderr
        until("next's worker to run", lambda: _task(b, member, "next", "Running"))
        assert _run(b, member, "long")["tasks"][0]["state"] == "Running"

        # A browser at the standby's console is sent to the leader's.
        status_code, _, headers = _get(a.url + "/console/")
        assert (status_code, headers["Location"]) == (307, f"{b.url}/console/")
    finally:
        _stop(agents)
        for c in pair:
            if c.process is not None and c.process.proc.poll() is None:
                c.process.signal(signal.SIGTERM)


def _task(c: Coordinator, token: str, run: str, state: str) -> dict[str, Any] | None:
    """The run's first task, once it is in `state`."""
    task = _run(c, token, run)["tasks"][0]
    return dict(task) if task["state"] == state else None


def _up(c: Coordinator) -> int:
    return sum(m["state"] == "Up" for m in c.ok("GET", "/api/v1/machines")["machines"])
