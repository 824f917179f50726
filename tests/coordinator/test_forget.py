"""Forgetting a machine that will never return (issue 25.4): its tasks end Lost and their GPUs
return, its row, reservations and agent tokens go, and a machine of that name later is new."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

from astraeus.coordinator.api.keys import REPORTING
from astraeus.coordinator.store import Role

from .conftest import ClientFactory, Cluster, make_cluster
from .fakes import report
from .test_concurrency import assert_no_gpu_held_twice

FORGOTTEN_AT = "2026-10-01T09:00:05+00:00"


async def _running(c: Cluster) -> None:
    """finetune (8 GPUs) runs on gpu-01, which has an admin label, a reservation for the
    workspace and its agent token; `next` (8 GPUs) waits for it."""
    await c.workspace("vision")
    await c.report("gpu-01")
    await c.label("gpu-01", pool="h100")
    for_vision = {
        "workspace": "vision",
        "starts_at": c.clock.now().isoformat(),
        "ends_at": (c.clock.now() + timedelta(days=1)).isoformat(),
    }
    status, made = await c.call("POST", "/api/v1/machines/gpu-01/reservations", body=for_vision)
    assert status == 201, made
    await c.submit("vision", "finetune", gpus=8)
    await c.run_pass()
    await c.report("gpu-01", [{"task": "finetune-0", "state": "Running"}], tasks=["finetune-0"])
    await c.submit("vision", "next", gpus=8)
    await c.run_pass()


async def _run(c: Cluster, name: str) -> Any:
    status, view = await c.call("GET", f"/api/v1/runs/{name}", c.tokens["vision"])
    assert status == 200, view
    return view


async def _forget(c: Cluster, machine: str = "gpu-01") -> tuple[int, Any]:
    return await c.call("POST", f"/api/v1/machines/{machine}/forget")


async def test_forget_ends_its_tasks_lost_and_removes_the_machine(fake_cluster: Cluster) -> None:
    await _forget_and_return(fake_cluster)


async def test_the_pass_worker_sees_a_forgotten_machine_go(
    aiohttp_client: ClientFactory, tmp_path: Path
) -> None:
    """The same with the real engine in its pass worker process, which reads the machines
    from the file and keeps its placement state between passes."""
    c = await make_cluster(aiohttp_client, tmp_path, pass_process=True)
    try:
        await _forget_and_return(c)
    finally:
        c.store.close()


async def _forget_and_return(c: Cluster) -> None:
    """finetune's task ends Lost with the forget's message, nothing stays held, the machine,
    its reservation and agent token are gone; its old token is refused, and with a new one it
    comes back as a new machine (no admin labels) where the waiting run is placed."""
    await _running(c)
    assert (await _run(c, "next"))["state"] == "Pending"
    c.clock.advance(5)
    status, forgotten = await _forget(c)
    assert status == 200, forgotten
    assert forgotten == {
        "name": "gpu-01",
        "forgotten_at": "2026-10-01T09:00:05Z",
        "tasks_lost": ["vision/finetune-0"],
        "gpus_released": 8,
        "reservations_removed": 1,
        "agent_tokens_revoked": 1,
    }
    run = await _run(c, "finetune")
    assert (run["state"], run["tasks"][0]["state"]) == ("Failed", "Lost")
    assert run["tasks"][0]["message"] == (
        f"machine gpu-01 was forgotten by an admin at {FORGOTTEN_AT}: it will not come back"
    )
    assert assert_no_gpu_held_twice(c.store) == 0
    status, _ = await c.call("GET", "/api/v1/machines/gpu-01")
    assert status == 404
    _, listed = await c.call("GET", "/api/v1/machines")
    assert listed["machines"] == []
    assert c.store.database.read("SELECT * FROM reservations") == []
    status, _ = await _forget(c)
    assert status == 404

    # Its old agent token is refused; with a new one it comes back as a new machine.
    body = {"report": report("gpu-01"), "updates": [], "logs": []}
    old = c.tokens.pop("gpu-01")
    status, _ = await c.call("PUT", "/api/v1/machines/gpu-01/report", old, body)
    assert status == 401
    reply = await c.report("gpu-01", tasks=["finetune-0"])  # a new token (`agent_token`)
    assert reply["assignments"] == []  # the Lost task is not given back
    _, machine = await c.call("GET", "/api/v1/machines/gpu-01")
    assert (machine["state"], machine["labels"].get("pool"), machine["gpus_free"]) == (
        "Up",
        None,
        8,
    )
    await c.label("gpu-01", pool="h100")
    await c.run_pass()
    placed = await _run(c, "next")
    assert (placed["state"], placed["tasks"][0]["machine"]) == ("Running", "gpu-01")
    assert assert_no_gpu_held_twice(c.store) == 8


async def test_forget_gives_back_gpus_a_lost_task_still_held(fake_cluster: Cluster) -> None:
    """A machine silent past the Lost grace keeps its Lost task's GPUs held for ever; the
    admin's forget is what gives them back, noted in the task's message."""
    c = fake_cluster
    await _running(c)
    c.clock.advance(301)
    assert (await c.run_pass()).lost == 1
    assert assert_no_gpu_held_twice(c.store) == 8
    status, forgotten = await _forget(c)
    assert status == 200, forgotten
    assert (forgotten["tasks_lost"], forgotten["gpus_released"]) == ([], 8)
    message = (await _run(c, "finetune"))["tasks"][0]["message"]
    assert message.startswith("machine gpu-01 stopped reporting at ")
    assert message.endswith(": its GPUs are no longer held")
    assert assert_no_gpu_held_twice(c.store) == 0


async def test_only_an_admin_forgets_a_machine_that_exists(fake_cluster: Cluster) -> None:
    """Members and agents get 403, an unknown machine 404; nothing changed by either."""
    c = fake_cluster
    await _running(c)
    path = "/api/v1/machines/gpu-01/forget"
    status, answer = await c.call("POST", path, c.tokens["vision"])
    assert (status, answer["error"]) == (403, "this needs an admin token")
    status, _ = await c.call("POST", path, c.agent_token("gpu-01"))
    assert status == 403
    status, _ = await _forget(c, "gpu-99")
    assert status == 404
    assert (await _run(c, "finetune"))["state"] == "Running"


async def test_forget_revokes_only_that_machines_agent_tokens(fake_cluster: Cluster) -> None:
    c = fake_cluster
    await _running(c)
    await c.report("gpu-02")
    status, _ = await _forget(c)
    assert status == 200
    machines = sorted(str(t.machine) for t in c.store.tokens.all() if t.role == Role.AGENT)
    assert machines == ["gpu-02"]
    await c.report("gpu-02")  # its token still works


async def test_forget_waits_for_a_report_being_received(fake_cluster: Cluster) -> None:
    """A report of the machine being received finishes before the forget starts, so it
    cannot write the machine's row back after the forget removed it."""
    c = fake_cluster
    await _running(c)
    reporting = c.client.app[REPORTING]
    reporting.add("gpu-01")  # a report is being received
    forgetting = asyncio.create_task(_forget(c))
    await asyncio.sleep(0.2)
    assert not forgetting.done()
    assert c.records.get("gpu-01") is not None
    reporting.discard("gpu-01")  # it was answered
    status, _ = await forgetting
    assert status == 200
    assert c.records.get("gpu-01") is None
    assert c.store.database.read("SELECT name FROM machines") == []
