"""Silence is not death (issue 25.3): a task whose machine falls silent keeps its state, shown
with when the machine was last heard, until `lost_after_seconds` (300 s by default); a Lost task
never comes back to hold GPUs."""

from __future__ import annotations

from typing import Any

from .conftest import Cluster
from .fakes import START
from .test_concurrency import assert_no_gpu_held_twice


async def _running(c: Cluster, run: str = "finetune") -> None:
    await c.workspace("vision")
    await c.report("gpu-01")
    await c.submit("vision", run, gpus=8)
    await c.run_pass()
    await c.report("gpu-01", [{"task": f"{run}-0", "state": "Running"}], tasks=[f"{run}-0"])


async def _run(c: Cluster, name: str = "finetune") -> Any:
    status, view = await c.call("GET", f"/api/v1/runs/{name}", c.tokens["vision"])
    assert status == 200, view
    return view


async def test_a_silent_machines_task_is_shown_silent_and_keeps_running(
    fake_cluster: Cluster,
) -> None:
    """Down after 30 s: the task stays Running and the run too, with `machine_silent_since`
    (the machine's last report) on the task, the run, the task's own route and the list; at
    299 s nothing is Lost; the agent back in time clears it and carries on."""
    c = fake_cluster
    await _running(c)
    last_heard = c.clock.now().isoformat()
    c.clock.advance(31)
    assert (await c.run_pass()).lost == 0
    run = await _run(c)
    assert (run["state"], run["tasks"][0]["state"]) == ("Running", "Running")
    assert run["machine_silent_since"] == run["tasks"][0]["machine_silent_since"] == last_heard
    _, task = await c.call("GET", "/api/v1/tasks/finetune-0", c.tokens["vision"])
    assert task["machine_silent_since"] == last_heard
    _, listed = await c.call("GET", "/api/v1/runs", c.tokens["vision"])
    assert listed["runs"][0]["machine_silent_since"] == last_heard
    _, machine = await c.call("GET", "/api/v1/machines/gpu-01")
    assert (machine["state"], machine["gpus_free"]) == ("Down", 0)

    c.clock.advance(268)  # silent for 299 s
    assert (await c.run_pass()).lost == 0
    reply = await c.report("gpu-01", tasks=["finetune-0"])  # back, the worker still running
    assert [a["task"] for a in reply["assignments"]] == ["finetune-0"]
    run = await _run(c)
    assert (run["state"], run["tasks"][0]["state"]) == ("Running", "Running")
    assert run["machine_silent_since"] is run["tasks"][0]["machine_silent_since"] is None
    assert run["tasks"][0]["message"] is None
    c.clock.advance(299)
    assert (await c.run_pass()).lost == 0


async def test_a_task_becomes_lost_only_after_lost_after_seconds(fake_cluster: Cluster) -> None:
    """Past 300 s of silence the task is Lost (no longer shown as silent: it ended), its run
    Failed, with the machine's last report in the message."""
    c = fake_cluster
    await _running(c)
    c.clock.advance(301)
    assert (await c.run_pass()).lost == 1
    run = await _run(c)
    assert (run["state"], run["tasks"][0]["state"]) == ("Failed", "Lost")
    assert run["machine_silent_since"] is run["tasks"][0]["machine_silent_since"] is None
    assert run["tasks"][0]["message"] == f"machine gpu-01 stopped reporting at {START.isoformat()}"


async def test_a_lost_task_never_holds_gpus_again(fake_cluster: Cluster) -> None:
    """A Lost task whose GPUs went back (its agent came back without the worker) and then
    went to another run stays Lost when an agent reports it Running again and lists it (a
    restored agent state): it is not assigned, holds nothing, and no GPU is held twice."""
    c = fake_cluster
    await _running(c)
    c.clock.advance(301)
    assert (await c.run_pass()).lost == 1
    await c.report("gpu-01", tasks=[])  # back without the worker: the GPUs return
    await c.submit("vision", "next", gpus=8)
    await c.run_pass()
    assert (await _run(c, "next"))["tasks"][0]["machine"] == "gpu-01"
    running = [{"task": "finetune-0", "state": "Running"}]
    reply = await c.report("gpu-01", running, tasks=["finetune-0", "next-0"])
    assert [a["task"] for a in reply["assignments"]] == ["next-0"]
    old = await _run(c)
    assert (old["state"], old["tasks"][0]["state"]) == ("Failed", "Lost")
    holds = c.store.database.read(
        "SELECT DISTINCT tasks.name FROM gpu_holds JOIN tasks ON tasks.id = gpu_holds.task_id"
    )
    assert [row["name"] for row in holds] == ["next-0"]
    assert assert_no_gpu_held_twice(c.store) == 8
