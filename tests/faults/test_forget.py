"""A machine that never returns, forgotten by an admin (issue 25.4), with real processes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from typing import Any

import pytest

from .rig import BIN, Cluster, alive, invariants, machine_report, until

pytestmark = pytest.mark.slow  # real agent and coordinator processes, several report windows


def _forget(cluster: Cluster, machine: str) -> dict[str, Any]:
    """`astra astraeus machine forget MACHINE --yes -o json`, as an admin would run it."""
    c = cluster.coordinator
    token = cluster.root / "admin.token"
    token.write_text(c.admin)
    env = {"PATH": os.environ.get("PATH", ""), "ASTRA_CONFIG": str(cluster.root / "none.toml")}
    done = subprocess.run(
        [str(BIN / "astra"), "astraeus", "machine", "forget", machine, "--yes", "-o", "json",
         "--api", c.url, "--token-file", str(token)],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_a_forgotten_machine_gives_its_gpus_back(cluster: Cluster) -> None:
    """node-a dies (its agent and worker killed) while `gone` runs there: the task turns Lost
    and its GPUs stay held for ever, so `next` waits. The admin forgets node-a (`astra astraeus
    machine forget --yes`): the machine is gone, its old agent token refused, the Lost task's
    message says why its GPUs came back, and the coordinator's log records it. The machine
    reinstalled (an empty agent state, a new token) comes back as new, and `next` is placed
    there and runs."""
    c = cluster.coordinator
    agent = cluster.agent("node-a")
    cluster.submit("gone", 8)
    worker = cluster.started("gone")
    until("gone to be Running", lambda: cluster.state("gone", "Running"))
    cluster.submit("next", 8)

    agent.signal(signal.SIGKILL)  # the machine dies, its worker with it
    agent.wait()
    os.kill(worker["pid"], signal.SIGKILL)
    until("gone's task to be Lost", lambda: cluster.state("gone", "Failed"))
    assert cluster.machine("node-a")["gpus_free"] == 0  # held: its worker might still run
    assert cluster.run("next")["state"] == "Pending"

    forgotten = _forget(cluster, "node-a")
    assert (forgotten["tasks_lost"], forgotten["gpus_released"]) == ([], 8)
    assert forgotten["agent_tokens_revoked"] == 1
    assert c.call("GET", "/api/v1/machines/node-a")[0] == 404
    task = cluster.run("gone")["tasks"][0]
    assert task["state"] == "Lost"
    assert task["message"].startswith("machine node-a stopped reporting at ")
    assert "; machine node-a was forgotten by an admin at " in task["message"]
    assert task["message"].endswith(": its GPUs are no longer held")
    assert c.process is not None
    assert "machine node-a forgotten by admin token " in c.process.output
    old_token = (cluster.root / "node-a.token").read_text()
    body = {"report": machine_report("node-a"), "updates": [], "logs": []}
    assert c.call("PUT", "/api/v1/machines/node-a/report", body, old_token)[0] == 401
    assert cluster.run("next")["state"] == "Pending"  # no machine to run on

    shutil.rmtree(cluster.root / "node-a")  # reinstalled: an empty agent state
    cluster.agent("node-a")  # a new agent token: back as a new machine
    following = cluster.started("next")
    assert not alive(worker["pid"])
    assert following["pid"] != worker["pid"]
    cluster.release("next")
    until("next to end", lambda: cluster.state("next", "Succeeded"))
    cluster.stop()
    assert invariants(c.db) == {"Failed": 1, "Succeeded": 1}
