"""The queue: priority order, the head's hold on machines, and every queue reason.

These use the first-fit fake engine, so each test controls exactly what fits where."""

from __future__ import annotations

from pathlib import Path

from astraeus.coordinator.api.keys import SCHEDULER
from astraeus.coordinator.scheduler.items import QueueItem, Waiting, candidate, queue_items
from astraeus.coordinator.store.queue import read_queue
from astraeus.shared import RunSpec
from astraeus.shared.reasons import ReasonKind

from .conftest import ClientFactory, Cluster, make_cluster
from .fakes import FirstFitSession


async def _reason(c: Cluster, run: str) -> tuple[str, str]:
    """The run's reason and, as data, its kind."""
    status, data = await c.call("GET", f"/api/v1/runs/{run}", c.tokens["vision"])
    assert status == 200
    return data["reason"], data["reason_kind"]


async def test_the_head_is_next_to_run_and_holds_its_machine(fake_cluster: Cluster) -> None:
    """A big run waiting for room is `Next to run`; a small one behind it that would fit on the
    big one's machine is `Queued behind` it instead of starting there."""
    c = fake_cluster
    await c.workspace("vision")
    await c.report("gpu-01")
    await c.submit("vision", "filler", gpus=4)
    await c.run_pass()
    await c.submit("vision", "big", gpus=8)
    await c.submit("vision", "small", gpus=2)
    result = await c.run_pass()
    assert result.placed == 0
    assert await _reason(c, "big") == (
        "Next to run: No machine fits: 1 of 1 machines ready",
        "NextToRun",
    )
    assert await _reason(c, "small") == ("Queued behind big", "QueuedBehind")
    _status, task = await c.call("GET", "/api/v1/tasks/small-0", c.tokens["vision"])
    assert (task["reason"], task["reason_kind"]) == ("Queued behind big", "QueuedBehind")
    assert task["placement"]["nodes"] == [
        {
            "name": "gpu-01",
            "state": "Up",
            "reasons": ["insufficient gpus: need 2, 4 free and usable"],
        }
    ]


async def test_runs_behind_the_head_start_elsewhere(fake_cluster: Cluster) -> None:
    """A run behind the head starts on a machine the head does not wait for."""
    c = fake_cluster
    await c.workspace("vision")
    await c.report("gpu-01")
    await c.report("gpu-02", gpus=2)
    await c.submit("vision", "filler", gpus=4)
    await c.run_pass()
    await c.submit("vision", "big", gpus=8)
    await c.submit("vision", "small", gpus=2)
    assert (await c.run_pass()).placed == 1
    _status, small = await c.call("GET", "/api/v1/runs/small", c.tokens["vision"])
    assert (small["state"], small["tasks"][0]["machine"]) == ("Running", "gpu-02")


async def test_a_lone_waiting_run_gives_the_room_reason(fake_cluster: Cluster) -> None:
    """With nothing behind it, a run waiting for room shows the engine's headline as is."""
    c = fake_cluster
    await c.workspace("vision")
    await c.report("gpu-01", gpus=4)
    await c.submit("vision", "finetune", gpus=8)
    await c.run_pass()
    assert await _reason(c, "finetune") == (
        "No machine fits: 1 of 1 machines ready",
        "NoMachineFits",
    )
    _status, task = await c.call("GET", "/api/v1/tasks/finetune-0", c.tokens["vision"])
    assert task["placement"] == {
        "checked_nodes": 1,
        "ready_nodes": 1,
        "down_nodes": 0,
        "closest": None,
        "nodes": [
            {
                "name": "gpu-01",
                "state": "Up",
                "reasons": ["insufficient gpus: need 8, 4 free and usable"],
            }
        ],
        "evaluated_at": "2026-10-01T09:00:00+00:00",
    }


async def test_quota_holds_a_run_back(fake_cluster: Cluster) -> None:
    """A run that would take its workspace past its GPU quota waits for the quota."""
    c = fake_cluster
    await c.workspace("vision", gpu_quota=8)
    await c.report("gpu-01")
    await c.report("gpu-02")
    await c.submit("vision", "a", gpus=8)
    await c.submit("vision", "b", gpus=1)
    assert (await c.run_pass()).placed == 1
    assert await _reason(c, "b") == (
        "Waits for namespace quota: 8 of 8 GPUs in use, this run needs 1 more",
        "WaitsForQuota",
    )


async def test_array_concurrency_holds_elements_back(fake_cluster: Cluster) -> None:
    """An array with concurrency 2 runs two elements; the others say why they wait."""
    c = fake_cluster
    await c.workspace("vision")
    await c.report("gpu-01")
    ask = {"gpu_requests": {"count": 1}, "array": {"size": 4, "concurrency": 2}}
    await c.submit("vision", "sweep", gpus=0, requested_resources=ask)
    assert (await c.run_pass()).placed == 2
    _, run = await c.call("GET", "/api/v1/runs/sweep", c.tokens["vision"])
    assert run["state"] == "Running"
    assert [(t["name"], t["state"]) for t in run["tasks"]] == [
        ("sweep-0", "Assigned"),
        ("sweep-1", "Assigned"),
        ("sweep-2", "Pending"),
        ("sweep-3", "Pending"),
    ]
    assert run["tasks"][2]["reason"] == "Array runs at most 2 tasks at once"
    assert (run["reason_kind"], run["tasks"][2]["reason_kind"]) == (None, "ArrayLimit")
    await c.report("gpu-01", [{"task": "sweep-0", "state": "Succeeded", "exit_code": 0}])
    assert (await c.run_pass()).placed == 1
    _status, task = await c.call("GET", "/api/v1/tasks/sweep-2", c.tokens["vision"])
    assert task["state"] == "Assigned"


async def test_higher_priority_goes_first(fake_cluster: Cluster) -> None:
    """With room for one, the higher-priority run starts even though it came second."""
    c = fake_cluster
    await c.workspace("vision", max_priority=100)
    await c.report("gpu-01")
    await c.submit("vision", "early", gpus=8)
    await c.submit("vision", "urgent", gpus=8, priority=100)
    await c.run_pass()
    _status, urgent = await c.call("GET", "/api/v1/runs/urgent", c.tokens["vision"])
    assert urgent["state"] == "Running"
    assert await _reason(c, "early") == ("No machine fits: 1 of 1 machines ready", "NoMachineFits")


async def test_dry_run_answers_without_storing(fake_cluster: Cluster) -> None:
    """A dry run says where the run would go, or why it would wait, and stores nothing."""
    c = fake_cluster
    member = await c.workspace("vision")
    await c.report("gpu-01")
    spec = {
        "name": "probe",
        "command": ["x"],
        "requested_resources": {"gpu_requests": {"count": 2}},
    }
    status, dry = await c.call("POST", "/api/v1/runs?dry_run=true", member, spec)
    assert status == 200
    assert dry["would_start"] is True
    assert dry["workers"][0]["machine"] == "gpu-01"
    assert len(dry["workers"][0]["assigned_gpu_ids"]) == 2
    spec["requested_resources"] = {"gpu_requests": {"count": 16}}
    status, dry = await c.call("POST", "/api/v1/runs?dry_run=1", member, spec)
    assert (dry["would_start"], dry["reason"], dry["reason_kind"]) == (
        False,
        "No machine fits: 1 of 1 machines ready",
        "NoMachineFits",
    )
    assert dry["placement"]["checked_nodes"] == 1
    assert c.store.database.read("SELECT count(*) AS n FROM runs")[0]["n"] == 0


async def test_a_dry_run_parses_each_queued_ask_once(fake_cluster: Cluster) -> None:
    """A dry run reads the queue ahead through the scheduler's parsed asks, as a pass does: a
    queued run's ask is parsed by the first dry run and the same object serves the next."""
    c = fake_cluster
    member = await c.workspace("vision")
    await c.report("gpu-01")
    big = await c.submit("vision", "big", gpus=16)
    scheduler = c.client.app[SCHEDULER]
    ask = {"gpu_requests": {"count": 1}}
    spec = {"name": "probe", "command": ["x"], "requested_resources": ask}
    await c.call("POST", "/api/v1/runs?dry_run=true", member, spec)
    [(seq, (ask, _spec))] = scheduler._pass_state.asks.items()
    assert ask.gpu_count == big["requested_resources"]["gpu_requests"]["count"]
    await c.call("POST", "/api/v1/runs?dry_run=true", member, spec)
    assert scheduler._pass_state.asks[seq][0] is ask


async def test_a_dry_run_asks_about_a_candidate_that_is_no_queue_row(fake_cluster: Cluster) -> None:
    """A dry run places a `Candidate` (no `seq`, no stored row) behind the queue: the quota
    still holds it back, and the answer names that candidate, never a queue item."""
    c = fake_cluster
    await c.workspace("vision", gpu_quota=8)
    await c.report("gpu-01")
    await c.report("gpu-02")
    await c.submit("vision", "a", gpus=8)
    assert (await c.run_pass()).placed == 1
    spec = RunSpec.model_validate(
        {"name": "probe", "command": ["x"], "requested_resources": {"gpu_requests": {"count": 1}}}
    )
    answer = await c.client.app[SCHEDULER].dry_run(spec, "vision")
    assert isinstance(answer, Waiting)
    assert (answer.item, answer.reason, answer.kind) == (
        candidate(spec, "vision"),
        "Waits for namespace quota: 8 of 8 GPUs in use, this run needs 1 more",
        ReasonKind.WAITS_FOR_QUOTA,
    )
    assert not isinstance(answer.item, QueueItem)
    assert c.store.database.read("SELECT count(*) AS n FROM runs")[0]["n"] == 1


async def test_cordon_keeps_runs_off_and_uncordon_lets_them_in(fake_cluster: Cluster) -> None:
    """A cordoned machine takes no run, with the cordon reason in the explanation."""
    c = fake_cluster
    await c.workspace("vision")
    await c.report("gpu-01")
    status, machine = await c.call(
        "POST", "/api/v1/machines/gpu-01/cordon", body={"reason": "firmware update"}
    )
    assert (status, machine["cordoned"], machine["cordon_reason"]) == (200, True, "firmware update")
    await c.submit("vision", "a", gpus=1)
    assert (await c.run_pass()).placed == 0
    status, task = await c.call("GET", "/api/v1/tasks/a-0", c.tokens["vision"])
    assert task["placement"]["nodes"][0]["reasons"] == ["machine is cordoned: firmware update"]
    await c.call("POST", "/api/v1/machines/gpu-01/uncordon")
    assert (await c.run_pass()).placed == 1


async def test_a_pass_stops_at_its_time_limit_and_the_next_goes_on(
    aiohttp_client: ClientFactory, tmp_path: Path
) -> None:
    """With no time for a pass, each pass decides one run, commits it, and the next goes on."""
    c = await make_cluster(aiohttp_client, tmp_path, FirstFitSession, max_pass_seconds=0)
    await c.workspace("vision")
    await c.report("gpu-01")
    for name in ("a", "b", "c"):
        await c.submit("vision", name, gpus=1)
    assert [(await c.run_pass()).placed for _ in range(4)] == [1, 1, 1, 0]
    c.store.close()


async def test_runs_asking_alike_share_one_parsed_ask(fake_cluster: Cluster) -> None:
    """Queued runs with the same ask get one parsed ask object between them;
    a different ask is parsed on its own."""
    c = fake_cluster
    await c.workspace("vision")
    await c.submit("vision", "a", gpus=2, requested_resources={"cpu_cores": 4})
    await c.submit("vision", "b", gpus=2, requested_resources={"cpu_cores": 4})
    await c.submit("vision", "c", gpus=1)
    a, b, other = queue_items(read_queue(c.store.database))
    assert a.ask is b.ask
    assert other.ask is not a.ask
    assert (a.ask.gpu_count, other.ask.gpu_count) == (2, 1)
