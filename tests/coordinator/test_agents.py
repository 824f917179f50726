"""Agents: reports, assignments in the reply, task updates, logs, and silent machines."""

from __future__ import annotations

from typing import Any

from astraeus.coordinator.api import REPORTS
from astraeus.coordinator.placement import Placement, WorkerPlacement
from astraeus.coordinator.scheduler.items import Placed, queue_items
from astraeus.coordinator.scheduler.pass_rows import as_rows
from astraeus.coordinator.scheduler.queue_walk import PassOutcome
from astraeus.coordinator.store.commit import commit_pass
from astraeus.coordinator.store.queue import read_queue
from astraeus.shared import AgentReport, Landing, NetworkKind, Shape
from astraeus.shared.fake_gpu import gpu_uuid

from .conftest import Cluster, make_cluster
from .fakes import FirstFitSession, report


async def _placed(c: Cluster, name: str = "finetune", gpus: int = 8) -> dict[str, Any]:
    await c.workspace("vision")
    await c.report("gpu-01")
    await c.submit("vision", name, gpus=gpus)
    await c.run_pass()
    return await c.report("gpu-01")


async def test_reply_carries_the_assignment(fake_cluster: Cluster) -> None:
    """After a pass the machine's next reply lists its task with GPUs and rendezvous."""
    reply = await _placed(fake_cluster)
    [assignment] = reply["assignments"]
    assert assignment["task"] == "finetune-0"
    assert assignment["workspace"] == "vision"
    assert assignment["command"] == ["python", "train.py"]
    assert assignment["assigned_gpu_ids"] == [gpu_uuid("gpu-01", i) for i in range(8)]
    assert assignment["cancel"] is False
    rendezvous = assignment["rendezvous"]
    assert rendezvous["master_addr"] == "127.0.0.1"
    assert (rendezvous["world_size"], rendezvous["rank"], rendezvous["node_rank"]) == (1, 0, 0)
    assert rendezvous["local_world_size"] == 1
    assert reply["report_interval_seconds"] == 5.0


async def test_updates_are_acked_and_move_the_task(fake_cluster: Cluster) -> None:
    """Starting, Running then Succeeded are stored in order; the reply acks the last seq."""
    c = fake_cluster
    await _placed(c)
    reply = await c.report("gpu-01", [{"task": "finetune-0", "state": "Starting"}])
    assert reply["acked_seq"] == 0
    reply = await c.report("gpu-01", [{"task": "finetune-0", "state": "Running"}])
    _, task = await c.call("GET", "/api/v1/tasks/finetune-0", c.tokens["vision"])
    assert (task["state"], task["started_at"]) == ("Running", "2026-10-01T09:00:00+00:00")
    reply = await c.report("gpu-01", [{"task": "finetune-0", "state": "Succeeded", "exit_code": 0}])
    assert reply["acked_seq"] == 2
    assert reply["assignments"] == []
    _status, run = await c.call("GET", "/api/v1/runs/finetune", c.tokens["vision"])
    assert run["state"] == "Succeeded"
    assert c.store.database.read("SELECT count(*) AS n FROM gpu_holds")[0]["n"] == 0


async def test_a_retried_update_is_applied_once(fake_cluster: Cluster) -> None:
    """An update whose seq was already acked is ignored (the agent retried before the ack)."""
    c = fake_cluster
    await _placed(c)
    at = c.clock.now().isoformat()
    uid = c.uid("gpu-01", "finetune-0")
    failed = {"seq": 0, "task_uid": uid, "state": "Failed", "exit_code": 3, "at": at}
    body = {"report": report("gpu-01"), "updates": [failed]}
    token = c.agent_token("gpu-01")
    for _ in range(2):
        status, reply = await c.call("PUT", "/api/v1/machines/gpu-01/report", token, body)
        assert (status, reply["acked_seq"]) == (200, 0)
    status, task = await c.call("GET", "/api/v1/tasks/finetune-0", c.tokens["vision"])
    assert (task["state"], task["exit_code"]) == ("Failed", 3)
    status, run = await c.call("GET", "/api/v1/runs/finetune", c.tokens["vision"])
    assert (run["state"], run["reason"]) == ("Failed", "finetune-0 Failed (exit 3)")


async def test_cancel_tells_the_agent_to_stop(fake_cluster: Cluster) -> None:
    """Cancelling a placed run marks its task `cancel` until the agent says it stopped."""
    c = fake_cluster
    await _placed(c)
    status, run = await c.call("POST", "/api/v1/runs/finetune/cancel", c.tokens["vision"])
    assert (status, run["state"], run["reason"]) == (200, "Cancelled", "cancelled by user")
    reply = await c.report("gpu-01")
    assert [a["cancel"] for a in reply["assignments"]] == [True]
    reply = await c.report("gpu-01", [{"task": "finetune-0", "state": "Cancelled"}])
    assert reply["assignments"] == []
    assert c.store.database.read("SELECT count(*) AS n FROM gpu_holds")[0]["n"] == 0


async def test_cancel_of_a_pending_run_ends_it_at_once(fake_cluster: Cluster) -> None:
    """A pending run cancelled never gets placed."""
    c = fake_cluster
    await c.workspace("vision")
    await c.report("gpu-01")
    await c.submit("vision", "later")
    _status, run = await c.call("POST", "/api/v1/runs/later/cancel", c.tokens["vision"])
    assert [t["state"] for t in run["tasks"]] == ["Cancelled"]
    result = await c.run_pass()
    assert result.placed == 0


async def test_logs_are_kept_per_task_and_capped(aiohttp_client: Any, tmp_path: Any) -> None:
    """Log chunks are kept per task; past the cap the oldest go first."""
    c = await make_cluster(aiohttp_client, tmp_path, FirstFitSession, log_cap_bytes=10)
    await _placed(c)
    logs = [
        {"task": "finetune-0", "offset": 0, "data": "hello "},
        {"task": "finetune-0", "offset": 6, "data": "world\n"},
    ]
    await c.report("gpu-01", logs=logs)
    status, view = await c.call("GET", "/api/v1/tasks/finetune-0/logs", c.tokens["vision"])
    assert (status, view) == (200, {"task": "finetune-0", "offset": 6, "data": "world\n"})
    c.store.close()


async def test_silent_machine_goes_down_and_its_tasks_are_lost(fake_cluster: Cluster) -> None:
    """No report for 30 s: Down; past the grace period (300 s) its tasks are Lost, their GPUs still
    held there while the machine comes back still running the worker, and free once its agent
    reports the worker ended."""
    c = fake_cluster
    await _placed(c)
    c.clock.advance(31)
    _, machine = await c.call("GET", "/api/v1/machines/gpu-01")
    assert machine["state"] == "Down"
    result = await c.run_pass()
    assert result.lost == 0  # Down, but still inside the grace period
    c.clock.advance(268)
    assert (await c.run_pass()).lost == 0  # silent 299 s: still within the 300 s default
    c.clock.advance(2)
    result = await c.run_pass()
    assert result.lost == 1
    _, task = await c.call("GET", "/api/v1/tasks/finetune-0", c.tokens["vision"])
    assert task["state"] == "Lost"
    assert task["message"] == "machine gpu-01 stopped reporting at 2026-10-01T09:00:00+00:00"
    _, run = await c.call("GET", "/api/v1/runs/finetune", c.tokens["vision"])
    assert (run["state"], run["reason"]) == (
        "Failed",
        "finetune-0 Lost: machine gpu-01 stopped reporting at 2026-10-01T09:00:00+00:00",
    )
    assert c.store.database.read("SELECT count(*) AS n FROM gpu_holds")[0]["n"] == 8
    # Back again: the late Running update of a Lost task changes nothing, nothing is assigned,
    # and its GPUs stay held: the worker may be running.
    reply = await c.report("gpu-01", [{"task": "finetune-0", "state": "Running"}])
    assert reply["assignments"] == []
    _status, machine = await c.call("GET", "/api/v1/machines/gpu-01")
    assert (machine["state"], machine["gpus_free"], machine["runs"]) == ("Up", 0, ["finetune"])
    ended = {"task": "finetune-0", "state": "Cancelled", "message": "stopped with SIGTERM"}
    await c.report("gpu-01", [ended])
    _status, machine = await c.call("GET", "/api/v1/machines/gpu-01")
    assert (machine["state"], machine["gpus_free"], machine["runs"]) == ("Up", 8, [])
    _, task = await c.call("GET", "/api/v1/tasks/finetune-0", c.tokens["vision"])
    assert (task["state"], task["message"]) == (
        "Lost",
        "machine gpu-01 stopped reporting at 2026-10-01T09:00:00+00:00; its worker ended at"
        " 2026-10-01T09:05:01+00:00 (stopped with SIGTERM)",
    )


async def test_machine_view_shows_free_and_allocated(fake_cluster: Cluster) -> None:
    """A machine's view counts free and allocated GPUs and names who holds each."""
    c = fake_cluster
    await _placed(c, gpus=3)
    _status, machine = await c.call("GET", "/api/v1/machines/gpu-01", c.tokens["vision"])
    assert (machine["gpus_total"], machine["gpus_free"], machine["gpus_allocated"]) == (8, 5, 3)
    assert machine["runs"] == ["finetune"]
    assert [g["task"] for g in machine["gpus"]][:4] == ["finetune-0"] * 3 + [None]
    assert machine["site"] == "127.0.0.0/24"


async def test_a_gpu_cannot_be_held_twice(fake_cluster: Cluster) -> None:
    """The database refuses a second hold on a GPU: that placement is dropped, and the other
    placement of the same chunk is still committed."""
    c = fake_cluster
    await c.workspace("vision")
    await c.report("gpu-01")
    await c.submit("vision", "a", gpus=8)
    await c.submit("vision", "b", gpus=8)
    await c.submit("vision", "c", gpus=8)
    await c.run_pass()
    await c.report("gpu-02")
    queued = {item.run: item for item in queue_items(read_queue(c.store.database))}

    def on(machine: str) -> Placement:
        gpus = tuple(gpu_uuid(machine, i) for i in range(8))  # gpu-01's all held by run a
        return Placement(
            workers=(WorkerPlacement(0, machine, gpus, 0, 0),),
            shape=Shape(tasks=1, gpus_each=8, why="1 machine × 8 GPUs"),
            landing=Landing(rung="node", where=machine),
            network=NetworkKind.LOCAL,
        )

    decided = [Placed(queued["b"], on("gpu-01")), Placed(queued["c"], on("gpu-02"))]
    rows = as_rows(PassOutcome(placed=decided)).placed
    assert commit_pass(c.store.database, rows, [], c.clock.now()) == 1
    _status, run = await c.call("GET", "/api/v1/runs/c", c.tokens["vision"])
    assert (run["state"], run["tasks"][0]["machine"]) == ("Running", "gpu-02")
    _status, run = await c.call("GET", "/api/v1/runs/b", c.tokens["vision"])
    assert (run["state"], run["tasks"][0]["state"]) == ("Pending", "Pending")


async def test_the_report_service_says_when_a_pass_should_run(fake_cluster: Cluster) -> None:
    """`Reports.receive`, the one report path (the handler's and the benchmark rig's): a new
    machine, or one whose hardware changed, asks for a pass; a plain heartbeat does not, moves
    the record's `last_seen`, and writes nothing until the next flush."""
    c = fake_cluster
    reports = c.client.app[REPORTS]
    c.agent_token("gpu-01")
    body = AgentReport.model_validate({"report": report("gpu-01")})
    first = await reports.receive(body, "10.0.0.1", c.clock.now())
    assert (first.poke, first.record.address, first.assignments) == (True, "10.0.0.1", [])
    written_at = c.clock.now().isoformat()
    c.clock.advance(5)
    beat = await reports.receive(body, "10.0.0.1", c.clock.now())
    assert (beat.poke, beat.record.last_seen) == (False, c.clock.now())
    row = c.store.database.read_one("SELECT last_seen FROM machines WHERE name = 'gpu-01'")
    assert row is not None
    assert row["last_seen"] == written_at
    assert c.records.flush_seen() == 1
    smaller = AgentReport.model_validate({"report": report("gpu-01", gpus=4)})
    assert (await reports.receive(smaller, "10.0.0.1", c.clock.now())).poke is True
