"""The demo cluster's ten machines (`coordinator/demo/machines/*.toml`), as the agent's fake
discovery reports them, reported to a test coordinator through the API as their agents would."""

from __future__ import annotations

import functools
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from astraeus.agent.fake import load_fake_machine
from astraeus.agent.inventory import Scanner
from astraeus.coordinator.demo.agents import machine_files

from .cluster import Cluster

XID = {"kind": "xid", "message": "Xid 79: GPU has fallen off the bus"}
AT_RISK_B1 = "Row remap pending: reset the GPU at the next opportunity"
"""What ib-b1's fake GPUs 1 and 2 report, which puts them at risk."""


@functools.cache
def _scanned() -> tuple[dict[str, Any], ...]:
    """Each demo machine's report, scanned once per test session (about half a second)."""
    reports = []
    with tempfile.TemporaryDirectory() as root:
        for description in machine_files():
            machine = load_fake_machine(str(description))
            scanner = Scanner(
                name=machine.name, backend=machine, data_dir=Path(root) / machine.name
            )
            reports.append(scanner.scan().model_dump(mode="json"))
            scanner.close()
    return tuple(reports)


def demo_reports() -> dict[str, dict[str, Any]]:
    """Fresh copies of the demo machines' reports, by name, stamped now."""
    now = datetime.now(UTC).isoformat()
    return {
        r["name"]: {**r, "reported_at": now, "gpus": [dict(g) for g in r["gpus"]]}
        for r in _scanned()
    }


async def report_demo(cluster: Cluster, faulted: tuple[str, int] | None = None) -> None:
    """Every demo machine reports; `faulted` (machine, GPU index) reports an Xid 79 fault."""
    for name, machine in demo_reports().items():
        if faulted is not None and faulted[0] == name:
            gpu = machine["gpus"][faulted[1]]
            gpu["health"] = {"state": "faulted", "signals": [XID]}
        await cluster.report(machine)


async def submit(cluster: Cluster, token: str, name: str, gpus: int, model: str) -> None:
    """Submit `name`, asking for `gpus` GPUs of `model`, that sleeps for a day."""
    spec = {"name": name, "command": ["sleep", "1d"]}
    spec["requested_resources"] = {"gpu_requests": {"count": gpus, "models": [model]}}
    await cluster.ok("POST", "/api/v1/runs", token, spec)


async def busy_demo(cluster: Cluster) -> str:
    """The demo cluster with one GPU of roce-2 faulted, eth-2 cordoned, a machine `spare-1` that
    never reported (Down), vision's `train` on 8 H100s and workspace `other`'s `secret-sweep` on
    4 GB200s; returns other's member token."""
    await report_demo(cluster, faulted=("roce-2", 1))
    await cluster.ok("POST", "/api/v1/machines/eth-2/cordon", body={"reason": "firmware update"})
    await cluster.ok("POST", "/api/v1/tokens", body={"role": "agent", "machine": "spare-1"})
    await cluster.ok("PUT", "/api/v1/workspaces/other", body={"pools": []})
    made = await cluster.ok("POST", "/api/v1/tokens", body={"role": "member", "workspace": "other"})
    await submit(cluster, cluster.member, "train", 8, "H100")
    await submit(cluster, made["token"], "secret-sweep", 4, "GB200")
    await cluster.run_pass()
    return str(made["token"])
