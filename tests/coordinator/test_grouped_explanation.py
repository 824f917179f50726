"""`explain=grouped`: a waiting task's explanation by reason, with counts and a few names."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from astraeus.shared import MachineState, NodeReasons, PendingExplanation
from astraeus.shared.explanation import RejectionGroup, grouped

from .conftest import Cluster


async def three_machines(c: Cluster) -> str:
    """A workspace and three machines: two short on GPUs (one of them fuller), one cordoned."""
    member = await c.workspace("vision")
    for name in ("gpu-01", "gpu-02", "gpu-03"):
        await c.report(name)
    await c.submit("vision", "filler", gpus=8)
    await c.submit("vision", "half", gpus=4)
    await c.run_pass()
    status, _ = await c.call("POST", "/api/v1/machines/gpu-03/cordon", body={"reason": "fw"})
    assert status == 200
    whole = {"gpu_requests": {"count": 8, "min_per_machine": 8}}
    await c.submit("vision", "big", gpus=0, requested_resources=whole)
    await c.run_pass()
    return member


def without_time(answer: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in answer.items() if key != "evaluated_at"}


async def test_a_task_explained_by_reason(cluster: Cluster) -> None:
    """`GET /tasks/{task}?explain=grouped` answers counts per reason, the closest machines and no
    per-machine list; without it the guide's per-machine `placement` is unchanged."""
    c = cluster
    member = await three_machines(c)
    status, task = await c.call("GET", "/api/v1/tasks/big-0?explain=grouped", member)
    assert status == 200
    assert (task["placement"], task["rejections"]) == (None, None)
    assert without_time(task["placement_grouped"]) == {
        "checked_nodes": 3,
        "ready_nodes": 3,
        "down_nodes": 0,
        "closest": "gpu-02",
        "closest_machines": ["gpu-02", "gpu-01"],
        "reasons": [
            {
                "reason": "insufficient gpus: need 8, 0 free and usable",
                "state": "Up",
                "filter": "gpus",
                "code": "InsufficientGPUs",
                "room": True,
                "count": 1,
                "machines": ["gpu-01"],
            },
            {
                "reason": "insufficient gpus: need 8, 4 free and usable",
                "state": "Up",
                "filter": "gpus",
                "code": "InsufficientGPUs",
                "room": True,
                "count": 1,
                "machines": ["gpu-02"],
            },
            {
                "reason": "machine is cordoned: fw",
                "state": "Up",
                "filter": "accepting",
                "code": "Cordoned",
                "room": False,
                "count": 1,
                "machines": ["gpu-03"],
            },
        ],
    }
    _, full = await c.call("GET", "/api/v1/tasks/big-0", member)
    assert full["placement_grouped"] is None
    assert [node["name"] for node in full["placement"]["nodes"]] == ["gpu-01", "gpu-02", "gpu-03"]


async def test_runs_and_dry_runs_explained_by_reason(cluster: Cluster) -> None:
    """A run's waiting tasks and a dry run that would wait answer grouped too; a bad `explain`
    is a 400 naming the field."""
    c = cluster
    member = await three_machines(c)
    _, run = await c.call("GET", "/api/v1/runs/big?explain=grouped", member)
    assert run["tasks"][0]["placement_grouped"]["closest"] == "gpu-02"
    spec = {"name": "dry", "command": ["x"], "requested_resources": {"gpu_requests": {"count": 8}}}
    status, dry = await c.call("POST", "/api/v1/runs?dry_run=true&explain=grouped", member, spec)
    assert status == 200
    assert dry["placement"] is None
    assert [group["count"] for group in dry["placement_grouped"]["reasons"]] == [1, 1, 1]
    status, error = await c.call("GET", "/api/v1/tasks/big-0?explain=short", member)
    assert (status, error["fields"]) == (
        400,
        [{"field": "explain", "problem": "must be full or grouped, got 'short'"}],
    )


async def test_grouped_shows_only_the_workspace_pools(cluster: Cluster) -> None:
    """A workspace limited to a pool sees, grouped as in full, only its pool's machines."""
    c = cluster
    member = await c.workspace("vision", pools=["a"])
    for name in ("gpu-01", "gpu-02", "gpu-03"):
        await c.report(name)
    await c.label("gpu-02", pool="a")
    await c.submit("vision", "huge", gpus=16, requested_resources={"gpu_requests": {"count": 16}})
    await c.run_pass()
    _, task = await c.call("GET", "/api/v1/tasks/huge-0?explain=grouped", member)
    grouped = task["placement_grouped"]
    assert grouped["checked_nodes"] == 1
    assert [group["machines"] for group in grouped["reasons"]] == [["gpu-02"]]


def test_grouping_counts_every_machine_and_names_a_few() -> None:
    """Twelve machines with one reason count 12 and name the first ten listed; the closest
    machines are the closest, then four more short only on room, by name."""
    nodes = [
        NodeReasons(name=f"m{i}", state=MachineState.UP, reasons=["insufficient gpus: need 8"])
        for i in (6, 0, 5, 1, 4, 2, 3, 9, 8, 7, 11, 10)
    ] + [NodeReasons(name="z", state=MachineState.DOWN, reasons=["machine is down"])]
    explanation = PendingExplanation(
        checked_nodes=13,
        ready_nodes=12,
        down_nodes=1,
        closest="m4",
        nodes=nodes,
        evaluated_at=datetime(2026, 10, 1, 9, 0, tzinfo=UTC),
    )
    room = RejectionGroup(
        filter="gpus", code="InsufficientGPUs", room=True, machines=[f"m{i}" for i in range(12)]
    )
    summary = grouped(explanation, [room])
    assert [(r.reason, r.count, r.machines, r.room) for r in summary.reasons] == [
        (
            "insufficient gpus: need 8",
            12,
            ["m6", "m0", "m5", "m1", "m4", "m2", "m3", "m9", "m8", "m7"],
            True,
        ),
        ("machine is down", 1, ["z"], False),
    ]
    assert summary.closest_machines == ["m4", "m0", "m1", "m10", "m11"]
