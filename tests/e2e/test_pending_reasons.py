"""Pending reasons on a real coordinator process (`astraeus-coordinator serve`, its pass worker
and SQLite), with fake machines that report once by hand: the API's `placement`, per-machine
reasons, `closest`, `rejections` and the run's reason, exactly (issue 26, items 3 and 4)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from faults.rig import PATIENT, Coordinator
from helpers import until

from astraeus.shared import SCHEMA_VERSION
from astraeus.shared.fake_gpu import gpu_uuid

pytestmark = pytest.mark.slow

H100 = ("NVIDIA H100 80GB HBM3", 80)
A100 = ("NVIDIA A100-SXM4-80GB", 80)
HELD = "held for a run ahead in the queue"


def report(name: str, gpus: int, model: tuple[str, int] = H100) -> dict[str, Any]:
    """What an agent of a machine with `gpus` GPUs of `model` reports."""
    return {
        "schema_version": SCHEMA_VERSION,
        "name": name,
        "cpu_cores": 96,
        "memory_bytes": 2**40,
        "gpus": [
            {
                "index": i,
                "uuid": gpu_uuid(name, i),
                "vendor": "nvidia",
                "model": model[0],
                "memory_bytes": model[1] * 2**30,
            }
            for i in range(gpus)
        ],
    }


class Site:
    """A started coordinator, a workspace `vision` with a member token, and machines that
    report once (never Down: `PATIENT`)."""

    def __init__(self, root: Path) -> None:
        self.coordinator = Coordinator(root)
        self.coordinator.start(PATIENT)
        self.coordinator.ok("PUT", "/api/v1/workspaces/vision", {})
        body = {"role": "member", "workspace": "vision"}
        self.member = self.coordinator.ok("POST", "/api/v1/tokens", body)["token"]

    def machine(self, name: str, gpus: int, model: tuple[str, int] = H100) -> None:
        body = {"role": "agent", "machine": name}
        token = self.coordinator.ok("POST", "/api/v1/tokens", body)["token"]
        path = f"/api/v1/machines/{name}/report"
        self.coordinator.ok("PUT", path, {"report": report(name, gpus, model)}, token)

    def submit(self, name: str, gpu_requests: dict[str, Any], **fields: Any) -> None:
        spec = {
            "name": name,
            "command": ["sleep", "600"],
            "requested_resources": {"gpu_requests": gpu_requests, **fields},
        }
        self.coordinator.ok("POST", "/api/v1/runs", spec, self.member)

    def run(self, name: str) -> dict[str, Any]:
        return dict(self.coordinator.ok("GET", f"/api/v1/runs/{name}", token=self.member))

    def task(self, name: str) -> dict[str, Any]:
        return dict(self.coordinator.ok("GET", f"/api/v1/tasks/{name}", token=self.member))

    def explained(self, run: str, reason: str) -> dict[str, Any]:
        """The run's first task once a pass has given the run `reason`."""
        until(f"{run} to read {reason!r}", lambda: self.run(run)["reason"] == reason)
        return self.task(f"{run}-0")


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    made = Site(tmp_path)
    yield made
    made.coordinator.stop()


def _without_time(placement: dict[str, Any]) -> dict[str, Any]:
    assert placement["evaluated_at"]
    return {key: value for key, value in placement.items() if key != "evaluated_at"}


def test_a_run_larger_than_the_workspace_says_so(site: Site) -> None:
    """A 128-GPU H100 run on 52 H100 GPUs (six 8-GPU machines, one cordoned, one 4-GPU) and an
    A100 machine: the run's reason says how many GPUs match; each H100 machine that could
    take its part says the same, the cordoned and the A100 machine their own reasons; no
    machine is the closest."""
    for i in range(6):
        site.machine(f"gpu-0{i}", 8)
    site.machine("gpu-06", 4)
    site.machine("a100", 8, A100)
    site.coordinator.ok("POST", "/api/v1/machines/gpu-02/cordon", {"reason": "firmware update"})
    site.submit("pretrain", {"count": 128, "models": ["H100"]})
    text = "the workspace's machines have 52 GPUs that match; the run asks for 128"
    task = site.explained("pretrain", text)
    assert site.run("pretrain")["reason_kind"] == "ClusterTooSmall"
    assert (task["reason"], task["reason_kind"]) == (text, "ClusterTooSmall")
    up = "Up"
    assert _without_time(task["placement"]) == {
        "checked_nodes": 8,
        "ready_nodes": 8,
        "down_nodes": 0,
        "closest": None,
        "nodes": [
            {"name": "a100", "state": up, "reasons": ["no H100 GPU"]},
            {"name": "gpu-00", "state": up, "reasons": [text]},
            {"name": "gpu-01", "state": up, "reasons": [text]},
            {"name": "gpu-02", "state": up, "reasons": ["machine is cordoned: firmware update"]},
            {"name": "gpu-03", "state": up, "reasons": [text]},
            {"name": "gpu-04", "state": up, "reasons": [text]},
            {"name": "gpu-05", "state": up, "reasons": [text]},
            {"name": "gpu-06", "state": up, "reasons": [text]},
        ],
    }
    others = ["gpu-00", "gpu-01", "gpu-03", "gpu-04", "gpu-05", "gpu-06"]
    assert task["rejections"] == [
        {"filter": "gpus", "code": "NoGPUModel", "room": False, "machines": ["a100"]},
        {"filter": "topology", "code": "ClusterTooSmall", "room": False, "machines": others},
        {"filter": "accepting", "code": "Cordoned", "room": False, "machines": ["gpu-02"]},
    ]


def test_a_held_machine_shows_its_own_reason_first(site: Site) -> None:
    """`filler` holds 4 GPUs of gpu-01; `big` (16 GPUs) heads the queue and holds gpu-01 and
    gpu-02. A B200 run reads `no B200 GPU` on both (and as its reason), never `held`; an
    8-GPU run that would fit gpu-02 but for the hold is `Queued behind big`, with gpu-02
    held and gpu-01 short of free GPUs (room), the closest."""
    site.machine("gpu-01", 8)
    site.machine("gpu-02", 8)
    site.submit("filler", {"count": 4}, node_selection={"names": ["gpu-01"]})
    until("filler to be placed", lambda: site.run("filler")["state"] != "Pending")
    site.submit("big", {"count": 16})
    until("big to head the queue", lambda: site.run("big")["reason"] is not None)
    site.submit("b200", {"count": 8, "models": ["B200"]})
    site.submit("whole", {"count": 8, "min_per_machine": 8})

    task = site.explained("b200", "no B200 GPU")
    assert (task["reason"], task["reason_kind"]) == ("no B200 GPU", "SameReason")
    assert _without_time(task["placement"]) == {
        "checked_nodes": 2,
        "ready_nodes": 2,
        "down_nodes": 0,
        "closest": None,
        "nodes": [
            {"name": "gpu-01", "state": "Up", "reasons": ["no B200 GPU"]},
            {"name": "gpu-02", "state": "Up", "reasons": ["no B200 GPU"]},
        ],
    }
    assert task["rejections"] == [
        {"filter": "gpus", "code": "NoGPUModel", "room": False, "machines": ["gpu-01", "gpu-02"]}
    ]

    task = site.explained("whole", "Queued behind big")
    assert task["reason_kind"] == "QueuedBehind"
    assert _without_time(task["placement"]) == {
        "checked_nodes": 2,
        "ready_nodes": 2,
        "down_nodes": 0,
        "closest": "gpu-01",
        "nodes": [
            {
                "name": "gpu-01",
                "state": "Up",
                "reasons": ["insufficient gpus: need 8, 4 free and usable"],
            },
            {"name": "gpu-02", "state": "Up", "reasons": [HELD]},
        ],
    }
    assert task["rejections"] == [
        {"filter": "gpus", "code": "InsufficientGPUs", "room": True, "machines": ["gpu-01"]},
        {"filter": "accepting", "code": "HeldForQueue", "room": True, "machines": ["gpu-02"]},
    ]
    assert site.run("big")["reason"] == "Next to run: No machine fits: 2 of 2 machines ready"
