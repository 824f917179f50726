"""Rung 2 needs the domain's IMEX channel, end to end: a coordinator and two agent processes
whose fake GB200 trays share an NVLink domain but report IMEX not available. A 4-GPU run of two
workers goes to their InfiniBand fabric and rack, and succeeds (on rung 2 the agents failed it:
`IMEX channel is not available on this machine`); a run that must stay in the domain waits,
each tray saying so."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import until

from .test_real_processes import FAST, Cluster

NO_IMEX = "IMEX channel is not available on this machine"

TRAY = """
# A GB200 NVL72 tray whose driver registers no IMEX channel device.
name = "{name}"
cores = 144
memory_gb = 960
imex = false

[labels]
"topology.astraeus.io/site" = "site-a"
"topology.astraeus.io/rack" = "nvl72-a"
"topology.astraeus.io/fabric" = "ib-a"

[gpus]
vendor = "nvidia"
count = 4
model = "NVIDIA GB200"
memory_gb = 186
nvlinks = 18
nvlink5 = true
fabric = {{ cluster_uuid = "7b968a6d-c8aa-45e1-9e07-e1e51be99c31", clique_id = 1 }}

[rdma]
count = 4
name_format = "ibp{{i}}s0f0"
link_layer = "InfiniBand"
rate = "400 Gb/sec (4X NDR)"
subnet_prefix = "fe80:0000:0000:00a1"
"""

WORKER = (
    "import os,pathlib,sys; "
    "pathlib.Path(sys.argv[1], 'rank-' + os.environ['RANK']).write_text(os.environ['WORLD_SIZE'])"
)
"""Writes `rank-<RANK>` holding its WORLD_SIZE, and exits 0."""

TRAYS = ("tray-1", "tray-2")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """The processes started in this test, each sent SIGTERM (and reaped) at the end."""
    started = Cluster(tmp_path)
    yield started
    started.stop()


@pytest.mark.slow
def test_an_nvlink_domain_without_imex_is_no_rung_for_a_gang(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Two trays of one NVLink domain without IMEX: a 2 × 2 gang takes their fabric and rack and
    succeeds; the same gang kept within the domain waits with the IMEX reason on each tray."""
    state = tmp_path / "coordinator"
    cluster.start_coordinator(state, "--cluster-name", "e2e", env=FAST)
    admin = cluster.admin_token(state)
    cluster.api("/workspaces/e2e", admin, {"pools": []}, method="PUT")
    member = cluster.api("/tokens", admin, {"role": "member", "workspace": "e2e"})["token"]
    for name in TRAYS:
        spec = tmp_path / f"{name}.toml"
        spec.write_text(TRAY.format(name=name))
        cluster.start_agent(name, admin, f"fake:{spec}")
    reports = until("both trays to report", lambda: _reports(cluster, admin))
    for report in reports:
        assert report["imex"]["available"] is False
        assert {gpu["nvlink_domain"] for gpu in report["gpus"]} != {None}

    out = tmp_path / "out"
    out.mkdir()
    gang = {"gpu_requests": {"count": 4}, "machines": 2}
    _submit(cluster, member, "gang", gang, [sys.executable, "-c", WORKER, str(out)])
    done = until("gang to end", lambda: _ended(cluster, member, "gang"))
    assert done["state"] == "Succeeded", done
    assert done["landing"] == {
        "rung": "fabric_rack",
        "where": "one InfiniBand fabric and one rack, ib-a and nvl72-a",
        "machines": list(TRAYS),
    }
    assert done["shape"]["why"] == "2 machines × 2 GPUs on InfiniBand fabric ib-a in rack nvl72-a"
    assert sorted(p.name for p in out.iterdir()) == ["rank-0", "rank-1"]

    domain = {**gang, "topology": {"keep_within": "nvlink_domain"}}
    _submit(cluster, member, "domain", domain, ["true"])
    task = until("domain-0 to be explained", lambda: _explained(cluster, member, "domain-0"))
    placement = task["placement"]
    assert placement["nodes"] == [
        {"name": name, "state": "Up", "reasons": [NO_IMEX]} for name in TRAYS
    ]
    assert (placement["checked_nodes"], placement["ready_nodes"]) == (2, 2)
    assert placement["closest"] is None
    assert task["rejections"] == [
        {"filter": "topology", "code": "NoIMEXChannel", "room": False, "machines": list(TRAYS)}
    ]
    run = cluster.api("/runs/domain", member)
    assert (run["state"], run["reason"], run["reason_kind"]) == ("Pending", NO_IMEX, "SameReason")


def _reports(cluster: Cluster, admin: str) -> list[dict[str, Any]] | None:
    found = []
    for name in TRAYS:
        try:
            view = cluster.api(f"/machines/{name}", admin)
        except OSError:
            return None
        if view.get("state") != "Up" or not view.get("report"):
            return None
        found.append(view["report"])
    return found


def _submit(
    cluster: Cluster, token: str, name: str, ask: dict[str, Any], command: list[str]
) -> None:
    spec = {"name": name, "command": command, "requested_resources": ask}
    cluster.api("/runs", token, spec)


def _ended(cluster: Cluster, token: str, name: str) -> dict[str, Any] | None:
    run = cluster.api(f"/runs/{name}", token)
    return run if run["state"] in ("Succeeded", "Failed") else None


def _explained(cluster: Cluster, token: str, task: str) -> dict[str, Any] | None:
    found = cluster.api(f"/tasks/{task}", token)
    return found if found.get("placement") else None
