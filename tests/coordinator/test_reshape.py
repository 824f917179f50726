"""Reshaping: a placed run none of whose workers started moves to a strictly tighter rung."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from astraeus.coordinator.placement import Placement, PlacementSession, WorkerPlacement
from astraeus.coordinator.scheduler.reshape import find_reshape, reuses_a_name
from astraeus.coordinator.scheduler.snapshot import build_snapshot
from astraeus.coordinator.store.queue import QueueRow
from astraeus.coordinator.store.unstarted import (
    HeldTask,
    Unstarted,
    commit_reshape,
    read_unstarted,
)
from astraeus.shared import Landing, NetworkKind, Shape, labels
from astraeus.shared.fake_gpu import gpu_uuid

from .conftest import Cluster

R1 = {labels.RACK: "r1"}
R2 = {labels.RACK: "r2"}


async def _spread_over_ethernet(c: Cluster) -> str:
    """a2 (rack r1) busy with `blocker`; `pretrain` (16 GPUs) lands on a1 (r1) and b1 (r2)."""
    member = await c.workspace("vision")
    await c.report("a2", labels=R1)
    await c.submit("vision", "blocker", gpus=8)
    assert (await c.run_pass()).placed == 1
    await c.report("a1", labels=R1)
    await c.report("b1", labels=R2)
    await c.submit("vision", "pretrain", gpus=16)
    assert (await c.run_pass()).placed == 1
    _, run = await c.call("GET", "/api/v1/runs/pretrain", member)
    assert run["landing"]["rung"] == "ethernet"
    assert [t["machine"] for t in run["tasks"]] == ["a1", "b1"]
    return member


def _holds(c: Cluster) -> list[tuple[str, str, str]]:
    rows = c.store.database.read(
        "SELECT tasks.name, gpu_holds.machine, gpu_holds.gpu_id FROM gpu_holds"
        " JOIN tasks ON tasks.id = gpu_holds.task_id ORDER BY 1, 2, 3"
    )
    return [(r["name"], r["machine"], r["gpu_id"]) for r in rows]


def _gpus(machine: str) -> list[str]:
    return [gpu_uuid(machine, i) for i in range(8)]


async def test_unstarted_gang_moves_to_a_tighter_rung(cluster: Cluster) -> None:
    """Once rack r1 has room for the whole run, the 2×8 over Ethernet becomes 2×8 in rack r1:
    b1's worker leaves its reply, a2's reply gets it, and the GPUs are held once each."""
    c = cluster
    member = await _spread_over_ethernet(c)
    await c.report("a2", [{"task": "blocker-0", "state": "Succeeded", "exit_code": 0}], labels=R1)
    await c.run_pass()
    _, run = await c.call("GET", "/api/v1/runs/pretrain", member)
    assert run["landing"]["rung"] == "rack"
    assert run["shape"]["why"] == "2 machines × 8 GPUs over Ethernet in rack r1"
    assert [(t["name"], t["state"], t["machine"]) for t in run["tasks"]] == [
        ("pretrain-0", "Assigned", "a1"),
        ("pretrain-1", "Assigned", "a2"),
    ]
    assert (await c.report("b1", labels=R2))["assignments"] == []
    stays = (await c.report("a1", labels=R1))["assignments"]
    assert [(a["task"], a["rendezvous"]["world_size"]) for a in stays] == [("pretrain-0", 2)]
    await c.report("a1", [{"task": "pretrain-0", "state": "Starting"}], labels=R1)
    moved = (await c.report("a2", labels=R1))["assignments"]
    assert [(a["task"], a["assigned_gpu_ids"]) for a in moved] == [("pretrain-1", _gpus("a2"))]
    assert _holds(c) == sorted(
        [("pretrain-0", "a1", g) for g in _gpus("a1")]
        + [("pretrain-1", "a2", g) for g in _gpus("a2")]
    )


async def test_a_started_worker_keeps_the_shape(cluster: Cluster) -> None:
    """A run one of whose workers is Starting is never reshaped, even when a tighter rung is
    free."""
    c = cluster
    member = await _spread_over_ethernet(c)
    await c.report("b1", [{"task": "pretrain-1", "state": "Starting"}], labels=R2)
    await c.report("a2", [{"task": "blocker-0", "state": "Succeeded", "exit_code": 0}], labels=R1)
    await c.run_pass()
    _, run = await c.call("GET", "/api/v1/runs/pretrain", member)
    assert run["landing"]["rung"] == "ethernet"
    assert [(t["state"], t["machine"]) for t in run["tasks"]] == [
        ("Assigned", "a1"),
        ("Starting", "b1"),
    ]
    assert read_unstarted(c.store.database) == []


async def test_commit_refuses_when_a_worker_started_meanwhile(cluster: Cluster) -> None:
    """A reshape decided before an agent reported Starting is not written: the old assignment
    and its GPU holds stay exactly as they were."""
    c = cluster
    await _spread_over_ethernet(c)
    await c.report("a2", [{"task": "blocker-0", "state": "Succeeded", "exit_code": 0}], labels=R1)
    now = c.clock.now()
    snapshot = build_snapshot(c.store, c.records, now, timedelta(seconds=30))
    workspaces = {w.name: w for w in c.store.workspaces.all()}
    unstarted = read_unstarted(c.store.database)
    assert [(u.row.run, u.rung) for u in unstarted] == [("pretrain", "ethernet")]
    decided = find_reshape(unstarted, snapshot, now, workspaces, PlacementSession, 10)
    assert decided is not None
    assert [w.machine for w in decided.placement.workers] == ["a1", "a2"]
    before = _holds(c)
    await c.report("a1", [{"task": "pretrain-0", "state": "Starting"}], labels=R1)
    assert commit_reshape(c.store.database, decided.old, decided.placement, now) is False
    assert _holds(c) == before


def _unstarted(*tasks: tuple[str, tuple[str, ...]]) -> Unstarted:
    spec = {"name": "pretrain", "requested_resources": {"gpu_requests": {"count": 2}}}
    row = QueueRow(
        seq=1,
        workspace="vision",
        run="pretrain",
        index=0,
        priority=0,
        spec=json.dumps(spec),
        first_evaluated_at=None,
        submitted_at=None,
    )
    held = tuple(
        HeldTask(id=i, index=i, machine=m, gpu_ids=g, cpu_cores=1, memory_bytes=1)
        for i, (m, g) in enumerate(tasks)
    )
    return Unstarted(row, "ethernet", "ethernet", None, held)


def _placement(*workers: tuple[str, tuple[str, ...]], network: str = "ethernet") -> Placement:
    return Placement(
        workers=tuple(
            WorkerPlacement(index=i, machine=m, gpu_ids=g, cpu_cores=1, memory_bytes=1)
            for i, (m, g) in enumerate(workers)
        ),
        shape=Shape(tasks=len(workers), gpus_each=1, why="test"),
        landing=Landing(rung="rack", where="test"),
        network=NetworkKind(network),
    )


@pytest.mark.parametrize(
    ("new", "network", "reused"),
    [
        ((("m3", ("g3",)), ("m4", ("g4",))), "ethernet", False),
        ((("m1", ("g1",)), ("m3", ("g3",))), "ethernet", False),
        ((("m1", ("g9",)), ("m3", ("g3",))), "ethernet", True),
        ((("m1", ("g1",)), ("m3", ("g3",))), "rdma", True),
        ((("m3", ("g3",)), ("m2", ("g2",))), "ethernet", True),
        ((("m1", ("g1",)), ("m1", ("g5",))), "ethernet", True),
    ],
    ids=[
        "all-new-machines",
        "worker-0-stays-identical",
        "worker-0-stays-other-gpu",
        "worker-0-stays-other-network",
        "worker-1-stays-master-moved",
        "worker-0-stays-but-shares-its-machine-now",
    ],
)
def test_a_name_stays_on_its_machine_only_unchanged(
    new: tuple[tuple[str, tuple[str, ...]], ...], network: str, reused: bool
) -> None:
    """A reshape may leave `<run>-<i>` on its machine only if the agent would be told exactly
    the same thing; otherwise it is a reuse and the reshape is not made."""
    old = _unstarted(("m1", ("g1",)), ("m2", ("g2",)))
    assert reuses_a_name(old, _placement(*new, network=network)) is reused
