"""Drives end to end, as separate processes: agents configured with drives report them, filter
10 and the drive score place runs by them, and the worker finds its drive."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from helpers import until

from astraeus.coordinator.placement import (
    ClusterSnapshot,
    MachineSnapshot,
    RunRequest,
    score_breakdown,
)
from astraeus.shared import MachineReport, MachineState, RequestedResources

from .test_real_processes import FAST, Cluster

WORKER = (
    "import os,pathlib,sys; d=pathlib.Path(os.environ['ASTRAEUS_DRIVE_DATASETS']); "
    "(d/'seen.txt').write_text(os.environ['ASTRAEUS_TASK']); "
    "pathlib.Path(sys.argv[1]).write_text(str(d))"
)
"""Writes a file into its drive, and the drive's path to the file named by its argument."""


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """The processes started in this test, each sent SIGTERM (and reaped) at the end."""
    started = Cluster(tmp_path)
    yield started
    started.stop()


def _start(cluster: Cluster, tmp_path: Path) -> tuple[str, str]:
    """A coordinator; node-a reaches `datasets` over the network and is configured with a drive
    `ghost` whose mount is gone; node-b holds `datasets`. Answers (admin, member) tokens."""
    state = tmp_path / "coordinator"
    cluster.start_coordinator(state, "--cluster-name", "e2e", env=FAST)
    admin = cluster.admin_token(state)
    cluster.api("/workspaces/e2e", admin, {"pools": []}, method="PUT")
    member = cluster.api("/tokens", admin, {"role": "member", "workspace": "e2e"})["token"]
    (tmp_path / "nfs").mkdir()
    (tmp_path / "disk").mkdir()
    drives = {
        "node-a": [
            "--network-drive", f"datasets={tmp_path / 'nfs'}",
            "--network-drive", f"ghost={tmp_path / 'gone'}",
        ],
        "node-b": ["--drive", f"datasets={tmp_path / 'disk'}"],
    }  # fmt: skip
    for name, flags in drives.items():
        cluster.start_agent(name, admin, "fake:l40s-pcie", *flags)
    until("both agents to report their drives", lambda: _drives(cluster, admin))
    return admin, member


def _drives(cluster: Cluster, admin: str) -> dict[str, list[dict[str, Any]]] | None:
    found = {}
    for name in ("node-a", "node-b"):
        detail = cluster.api(f"/machines/{name}", admin)
        if detail is None or detail.get("report") is None:
            return None  # not reported yet
        found[name] = detail["report"]["drives"]
    return found if all(found.values()) else None


def _run(cluster: Cluster, token: str, name: str) -> dict[str, Any]:
    return dict(cluster.api(f"/runs/{name}", token))


def test_agents_report_drives_and_runs_go_next_to_theirs(cluster: Cluster, tmp_path: Path) -> None:
    """Agent processes report their drives with statvfs figures and reachability; scored on
    those reports node-b gets +40 for holding `datasets` and node-a, its rack neighbour, +10; a
    run mounting it goes to node-b, and
    its worker finds the drive in ASTRAEUS_DRIVE_DATASETS; a drive nobody has, or one whose
    mount is gone, keeps runs waiting with the guide's filter-10 reasons."""
    admin, member = _start(cluster, tmp_path)
    reported = _drives(cluster, admin)
    assert reported is not None
    assert [(d["name"], d["local"], d["reachable"]) for d in reported["node-a"]] == [
        ("datasets", False, True),
        ("ghost", False, False),
    ]
    (held,) = reported["node-b"]
    assert (held["name"], held["path"], held["local"]) == ("datasets", str(tmp_path / "disk"), True)
    assert held["capacity_bytes"] > 0

    terms = _drive_terms(cluster, admin)
    assert terms == {"node-a": (0, 10), "node-b": (40, 0)}

    out = tmp_path / "seen-path"
    command = [sys.executable, "-c", WORKER, str(out)]
    cluster.astra(
        "astraeus", "run", "--name", "prep", "--cpus", "1", "--drive", "datasets=/data",
        "--", *command, token=member,
    )  # fmt: skip
    done = until("prep to end", lambda: _ended(cluster, member, "prep"))
    assert done["state"] == "Succeeded", done
    assert done["tasks"][0]["machine"] == "node-b"
    assert out.read_text() == str(tmp_path / "disk")
    assert (tmp_path / "disk/seen.txt").read_text() == "prep-0"

    for name, drive in (("nowhere", "missing"), ("stale", "ghost")):
        mount = {"drives": [{"name": drive, "mount_path": "/d"}]}
        spec = {"name": name, "command": ["true"], "requested_resources": mount}
        cluster.api("/runs", member, spec)
    waiting = until("both to be explained", lambda: _explained(cluster, member, "nowhere", "stale"))
    assert waiting == {
        "nowhere": "drive missing does not exist",
        "stale": "drive ghost is not reachable from this machine",
    }


def _drive_terms(cluster: Cluster, admin: str) -> dict[str, tuple[int, int]]:
    """(drives_here, drives_near) for a worker mounting `datasets`, scored on the reports the
    agent processes sent: node-b holds it (+40); node-a, in the same rack over Ethernet, is
    near it (+10)."""
    views = [
        MachineSnapshot(
            name=name,
            state=MachineState.UP,
            report=MachineReport.model_validate(cluster.api(f"/machines/{name}", admin)["report"]),
        )
        for name in ("node-a", "node-b")
    ]
    snap = ClusterSnapshot(machines=tuple(views))
    mount = {"drives": [{"name": "datasets", "mount_path": "/data"}]}
    ask = RequestedResources.model_validate(mount)
    request = RunRequest(name="prep", workspace="e2e", ask=ask)
    found = {}
    for view in views:
        terms = dict(score_breakdown(request, view, 0, now=datetime.now(UTC), snapshot=snap))
        found[view.name] = (terms["drives_here"], terms["drives_near"])
    return found


def _ended(cluster: Cluster, token: str, name: str) -> dict[str, Any] | None:
    run = _run(cluster, token, name)
    return run if run["state"] in ("Succeeded", "Failed") else None


def _explained(cluster: Cluster, token: str, *names: str) -> dict[str, str] | None:
    reasons = {name: _run(cluster, token, name).get("reason") for name in names}
    return reasons if all(reasons.values()) else None  # type: ignore[return-value]
