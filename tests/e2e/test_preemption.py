"""Preemption over real processes (issue 28.3): a coordinator with `preemption = "priority"`, a
fake-H100 agent and real workers. A priority-1000 run on the full machine stops the sweep
(SIGTERM, which it ignores, then SIGKILL after the 1 s grace the coordinator chose), starts once
the sweep's worker is gone, and when it is done the sweep starts again with
`ASTRAEUS_RESTART_COUNT=1` and finishes."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import until

from .test_real_processes import FAST, Cluster
from .test_real_processes import cluster as cluster  # the fixture, stopping its processes

SWEEP = (
    "import json,os,signal,sys,time,pathlib; d=pathlib.Path(sys.argv[1]); "
    "n=os.environ['ASTRAEUS_RESTART_COUNT']; "
    "signal.signal(signal.SIGTERM, lambda *_: (d/('term-'+n)).write_text('x')); "
    "(d/('env-'+n+'.json')).write_text(json.dumps(dict(os.environ))); t=time.monotonic(); "
    "[time.sleep(0.1) for _ in iter(lambda: (d/('release-'+n)).exists() or "
    "time.monotonic()-t>120, True)]"
)
"""Writes its environment to env-<restart count>.json, notes a SIGTERM in term-<count> and
goes on (only SIGKILL stops it), and ends 0 on release-<count>, at most 120 s."""


def _run(cluster: Cluster, name: str, token: str) -> dict[str, Any]:
    return dict(cluster.api(f"/runs/{name}", token))


def _env(out: Path, count: int) -> dict[str, str] | None:
    try:
        return dict(json.loads((out / f"env-{count}.json").read_text()))
    except (FileNotFoundError, json.JSONDecodeError):
        return None  # not written yet, or caught mid-write


@pytest.mark.slow
def test_an_urgent_run_preempts_the_sweep_which_comes_back(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The sweep holds all 8 GPUs; the urgent run stops it, SIGKILL after the grace, starts,
    succeeds; the sweep is placed again, restart count 1, and succeeds with two attempts."""
    state = tmp_path / "coordinator"
    env = {**FAST, "ASTRAEUS_PREEMPTION": "priority", "ASTRAEUS_PREEMPTION_GRACE_SECONDS": "1"}
    cluster.start_coordinator(state, env=env)
    admin = cluster.admin_token(state)
    member = cluster.member_of_e2e(admin)
    cluster.api("/workspaces/e2e", admin, {"max_priority": 1000}, method="PUT")
    cluster.start_agent("node-a", admin, "fake:h100-sxm")
    until("the agent to report", lambda: cluster.api("/machines/node-a", admin))
    out = tmp_path / "out"
    out.mkdir()
    sweep = {
        "name": "sweep",
        "command": [sys.executable, "-c", SWEEP, str(out)],
        "requested_resources": {"gpu_requests": {"count": 8}},
    }
    cluster.api("/runs", member, sweep)
    until("the sweep's worker", lambda: _env(out, 0))
    urgent = {
        "name": "urgent",
        "command": [sys.executable, "-c", "print('urgent done')"],
        "priority": 1000,
        "requested_resources": {"gpu_requests": {"count": 8}},
    }
    cluster.api("/runs", member, urgent)

    done = until(
        "the urgent run to succeed",
        lambda: (r := _run(cluster, "urgent", member))["state"] == "Succeeded" and r,
    )
    assert done["attempt"] == 1
    assert (out / "term-0").exists()  # told with SIGTERM first, then killed after the grace
    second = until("the sweep's second worker", lambda: _env(out, 1))
    assert second["ASTRAEUS_RESTART_COUNT"] == "1"
    run = _run(cluster, "sweep", member)
    assert (run["state"], run["attempt"], run["preemptions"]) == ("Running", 2, 1)
    assert run["preempted_for_priority"] == 1000
    (out / "release-1").touch()
    ended = until(
        "the sweep to end",
        lambda: (r := _run(cluster, "sweep", member))["state"] != "Running" and r,
    )
    assert ended["state"] == "Succeeded"
    first, last = ended["attempts"]
    assert first["reason"] == "Preempted by a higher-priority run (priority 1000)"
    assert (last["number"], last["reason"]) == (2, None)
