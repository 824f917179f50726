"""Partitions and outages: a Lost task keeps its GPUs on its machine until its agent says the
worker is gone, and silence counts only from when the coordinator could hear."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from astraeus.coordinator.domain.lifecycle import NO_WORKER
from astraeus.coordinator.scheduler.compute import PassInputs
from astraeus.coordinator.scheduler.pass_worker import worker_pass
from astraeus.shared.clock import FakeClock

from .conftest import ClientFactory, Cluster, make_cluster
from .fakes import START, FirstFitSession

DOWN_AFTER = timedelta(seconds=30)

STOPPED = "cancelled: no longer assigned by the coordinator; stopped with SIGTERM"


async def _running(c: Cluster, machine: str = "gpu-01", run: str = "finetune") -> None:
    """`run` (8 GPUs) placed on `machine`, whose agent reports it Running."""
    await c.workspace("vision")
    await c.report(machine)
    await c.submit("vision", run, gpus=8)
    await c.run_pass()
    await c.report(machine, [{"task": f"{run}-0", "state": "Running"}], tasks=[f"{run}-0"])


async def _lost(c: Cluster) -> None:
    """finetune runs on gpu-01, which then stays silent past the grace period (300 s)."""
    await _running(c)
    c.clock.advance(301)
    assert (await c.run_pass()).lost == 1


async def _state(c: Cluster, run: str) -> tuple[str, str | None]:
    _, view = await c.call("GET", f"/api/v1/runs/{run}", c.tokens["vision"])
    return view["state"], view["tasks"][0]["machine"]


def _holds(c: Cluster) -> dict[str, int]:
    rows = c.store.database.read(
        "SELECT tasks.name, count(*) AS n FROM gpu_holds JOIN tasks ON tasks.id = task_id"
        " GROUP BY tasks.name"
    )
    return {row["name"]: row["n"] for row in rows}


async def test_lost_gpus_stay_held_until_the_worker_is_reported_gone(
    fake_cluster: Cluster,
) -> None:
    """While its machine is away, and when it comes back still running the worker, a Lost
    task's GPUs go to no other run; the reply no longer lists the task, and once the agent
    reports the worker stopped the next run gets them."""
    c = fake_cluster
    await _lost(c)
    await c.submit("vision", "next", gpus=8)
    await c.run_pass()
    assert await _state(c, "next") == ("Pending", None)
    reply = await c.report("gpu-01", tasks=["finetune-0"])
    assert reply["assignments"] == []
    await c.run_pass()
    assert await _state(c, "next") == ("Pending", None)
    assert _holds(c) == {"finetune-0": 8}
    await c.report(
        "gpu-01", [{"task": "finetune-0", "state": "Cancelled", "message": STOPPED}], tasks=[]
    )
    assert _holds(c) == {}
    await c.run_pass()
    assert await _state(c, "next") == ("Running", "gpu-01")


async def test_a_machine_back_without_the_worker_frees_its_gpus_at_once(
    fake_cluster: Cluster,
) -> None:
    """A machine whose agent comes back running no worker for the Lost task frees its GPUs
    with that first report, and the task keeps its Lost message."""
    c = fake_cluster
    await _lost(c)
    await c.report("gpu-01", tasks=[])
    assert _holds(c) == {}
    _, machine = await c.call("GET", "/api/v1/machines/gpu-01")
    assert (machine["state"], machine["gpus_free"]) == ("Up", 8)
    _, task = await c.call("GET", "/api/v1/tasks/finetune-0", c.tokens["vision"])
    assert (task["state"], task["message"]) == (
        "Lost",
        "machine gpu-01 stopped reporting at 2026-10-01T09:00:00+00:00",
    )


async def test_an_agent_that_does_not_say_what_it_runs_keeps_them_held(
    fake_cluster: Cluster,
) -> None:
    """A report without the list of tasks (an older agent) frees nothing: only the worker's
    reported end does."""
    c = fake_cluster
    await _lost(c)
    await c.report("gpu-01")
    assert _holds(c) == {"finetune-0": 8}


async def test_other_machines_gpus_are_unaffected(fake_cluster: Cluster) -> None:
    """The held GPUs are only the lost machine's: a run that fits elsewhere starts there."""
    c = fake_cluster
    await _lost(c)
    await c.report("gpu-02")
    await c.submit("vision", "next", gpus=8)
    await c.run_pass()
    assert await _state(c, "next") == ("Running", "gpu-02")


async def test_a_started_task_its_agent_does_not_run_ends_lost(fake_cluster: Cluster) -> None:
    """A Running task its agent says it runs no worker for (its state was wiped, or the
    database restored from an older backup) ends Lost and frees its GPUs; an Assigned one the
    agent has not seen yet stays."""
    c = fake_cluster
    await _running(c)
    await c.submit("vision", "later", gpus=0)
    await c.run_pass()
    await c.report("gpu-01", tasks=[])
    _, task = await c.call("GET", "/api/v1/tasks/finetune-0", c.tokens["vision"])
    assert (task["state"], task["message"]) == ("Lost", NO_WORKER.format(machine="gpu-01"))
    assert await _state(c, "finetune") == ("Failed", "gpu-01")
    assert await _state(c, "later") == ("Running", "gpu-01")
    assert _holds(c) == {}


async def _restarted(aiohttp_client: ClientFactory, tmp_path: Path, after: float) -> Cluster:
    """The coordinator again on the same file, `after` seconds past START."""
    clock = FakeClock(START)
    clock.advance(after)
    c = await make_cluster(aiohttp_client, tmp_path, FirstFitSession, clock)
    c.tokens["vision"] = (await _member(c))["token"]
    return c


async def _member(c: Cluster) -> Any:
    _, made = await c.call("POST", "/api/v1/tokens", body={"role": "member", "workspace": "vision"})
    return made


async def test_silence_counts_from_the_coordinators_start(
    aiohttp_client: ClientFactory, tmp_path: Path
) -> None:
    """After a ten-minute outage the machines it could not hear are Up and their tasks
    Running; they turn Down and Lost only when silent for the whole window after the start."""
    first = await make_cluster(aiohttp_client, tmp_path, FirstFitSession)
    await _running(first)
    first.store.close()
    c = await _restarted(aiohttp_client, tmp_path, after=600)
    assert (await c.run_pass()).lost == 0
    _, machine = await c.call("GET", "/api/v1/machines/gpu-01")
    assert machine["state"] == "Up"
    assert await _state(c, "finetune") == ("Running", "gpu-01")
    c.clock.advance(31)
    _, machine = await c.call("GET", "/api/v1/machines/gpu-01")
    assert machine["state"] == "Down"
    assert (await c.run_pass()).lost == 0
    c.clock.advance(270)
    assert (await c.run_pass()).lost == 1
    c.store.close()


async def test_the_pass_worker_counts_silence_from_heard_since(cluster: Cluster) -> None:
    """A pass computed in the worker process sees a machine last seen before an outage as Up
    while the coordinator has heard for less than `down_after` (and Down without that)."""
    c = cluster
    await c.workspace("vision")
    await c.report("gpu-01")
    await c.submit("vision", "finetune", gpus=1)
    db = c.store.database.location
    later = START + timedelta(seconds=600)
    restarted = START + timedelta(seconds=590)
    decisions, _ = worker_pass(db, PassInputs(later, DOWN_AFTER, restarted, 500, 2.0))
    assert [p.run for p in decisions.placed] == ["finetune"]
    decisions, _ = worker_pass(db, PassInputs(later, DOWN_AFTER, START, 500, 2.0))
    assert (decisions.placed, [w.reason for w in decisions.waiting]) == (
        [],
        ["No machine fits: 0 of 1 machines ready"],
    )
