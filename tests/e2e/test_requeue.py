"""Requeue after a fault over real processes (issue 28.5): a coordinator, a fake-H100 agent and
real workers. A fatal Xid on the GPU under a running worker, then the worker's crash, requeue a
run with retries 1: it restarts on another GPU with `ASTRAEUS_RESTART_COUNT=1` and succeeds."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import until

from astraeus.agent.fake.state import XID_LOG

from .test_real_processes import FAST, Cluster
from .test_real_processes import cluster as cluster  # the fixture, stopping its processes

WORKER = (
    "import json,os,sys,time,pathlib; d=pathlib.Path(sys.argv[1]); "
    "n=os.environ['ASTRAEUS_RESTART_COUNT']; "
    "(d/('env-'+n+'.json')).write_text(json.dumps(dict(os.environ))); t=time.monotonic(); "
    "[time.sleep(0.1) for _ in iter(lambda: (d/('crash-'+n)).exists() or "
    "(d/('release-'+n)).exists() or time.monotonic()-t>120, True)]; "
    "sys.exit(1 if (d/('crash-'+n)).exists() else 0)"
)
"""Writes its environment to env-<restart count>.json, then waits for crash-<count> (exit 1,
as a CUDA process does when its GPU falls off the bus) or release-<count> (exit 0), at most
120 s."""


def _run(cluster: Cluster, token: str) -> dict[str, Any]:
    return dict(cluster.api("/runs/resilient", token))


def _env(out: Path, count: int) -> dict[str, str] | None:
    try:
        return dict(json.loads((out / f"env-{count}.json").read_text()))
    except (FileNotFoundError, json.JSONDecodeError):
        return None  # not written yet, or caught mid-write


def _faulted(cluster: Cluster, token: str, gpu: str) -> bool:
    detail = cluster.api("/machines/node-a", token)
    (found,) = [g for g in detail["report"]["gpus"] if g["uuid"] == gpu]
    return bool(found["health"]["state"] == "faulted")


@pytest.mark.slow
def test_a_fatal_xid_mid_run_restarts_the_run_on_another_gpu(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The worker's GPU gets Xid 79 while it runs; the agent reports the GPU faulted, the
    worker then crashes (exit 1): the run with retries 1 goes back to the queue, is placed on
    another GPU, its new worker sees ASTRAEUS_RESTART_COUNT=1 and TORCHELASTIC_RESTART_COUNT=1,
    and the run succeeds with two attempts, the first ended by the fault."""
    state = tmp_path / "coordinator"
    cluster.start_coordinator(state, env=FAST)
    admin = cluster.admin_token(state)
    member = cluster.member_of_e2e(admin)
    cluster.start_agent("node-a", admin, "fake:h100-sxm")
    until("the agent to report", lambda: cluster.api("/machines/node-a", admin))
    out = tmp_path / "out"
    out.mkdir()
    spec = {
        "name": "resilient",
        "command": [sys.executable, "-c", WORKER, str(out)],
        "requested_resources": {"gpu_requests": {"count": 1}},
        "retries": 1,
    }
    assert cluster.api("/runs", member, spec)["retries"] == 1

    first = until("the first worker's environment", lambda: _env(out, 0))
    assert (first["ASTRAEUS_RESTART_COUNT"], first["TORCHELASTIC_RESTART_COUNT"]) == ("0", "0")
    (gpu,) = _run(cluster, member)["tasks"][0]["assigned_gpu_ids"]
    detail = cluster.api("/machines/node-a", admin)
    (index,) = [g["index"] for g in detail["report"]["gpus"] if g["uuid"] == gpu]
    with (state.parent / "node-a" / "fake" / "node-a" / XID_LOG).open("a") as xids:
        xids.write(f"{index} 79\n")
    until("the coordinator to see the GPU faulted", lambda: _faulted(cluster, admin, gpu))
    (out / "crash-0").touch()

    second = until("the restarted worker's environment", lambda: _env(out, 1))
    assert (second["ASTRAEUS_RESTART_COUNT"], second["TORCHELASTIC_RESTART_COUNT"]) == ("1", "1")
    assert second["CUDA_VISIBLE_DEVICES"] != gpu
    run = _run(cluster, member)
    assert (run["state"], run["attempt"]) == ("Running", 2)
    assert run["tasks"][0]["assigned_gpu_ids"] != [gpu]
    (out / "release-1").touch()

    done = until("the run to end", lambda: (r := _run(cluster, member))["state"] != "Running" and r)
    assert done["state"] == "Succeeded"
    ended, last = done["attempts"]
    assert ended["reason"].startswith("resilient-0 Failed (exit 1): exited with code 1; GPU ")
    assert "faulted: Xid 79" in ended["reason"]
    assert (last["number"], last["reason"]) == (2, None)
