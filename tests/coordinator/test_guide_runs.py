"""The guide's promises on a real coordinator (real engine, SQLite file, aiohttp app): workers
that share a machine in `mode: Any`, and array elements that are independent tasks."""

from __future__ import annotations

from typing import Any

from .conftest import Cluster

ANY_16_ON_4 = {
    "gpu_requests": {"count": 16},
    "machines": 4,
    "node_selection": {"mode": "Any", "names": ["eth1", "eth2"]},
}


async def _run(c: Cluster, name: str) -> dict[str, Any]:
    status, data = await c.call("GET", f"/api/v1/runs/{name}", c.tokens["vision"])
    assert status == 200
    return data  # type: ignore[no-any-return]


async def test_any_mode_places_four_workers_on_two_free_machines(cluster: Cluster) -> None:
    """16 GPUs, machines 4, Any, names eth1,eth2 on two free 8-GPU machines: four workers, two
    per machine, each with 4 GPUs of its own, and the agent is told each one's local rank."""
    c = cluster
    await c.workspace("vision")
    for name in ("eth1", "eth2"):
        await c.report(name)
    await c.submit("vision", "stack", gpus=0, requested_resources=ANY_16_ON_4)
    assert (await c.run_pass()).placed == 1
    run = await _run(c, "stack")
    assert [(t["name"], t["machine"], len(t["assigned_gpu_ids"])) for t in run["tasks"]] == [
        ("stack-0", "eth1", 4),
        ("stack-1", "eth1", 4),
        ("stack-2", "eth2", 4),
        ("stack-3", "eth2", 4),
    ]
    assert run["shape"]["why"] == (
        "4 workers × 4 GPUs on 2 machines over Ethernet in site 127.0.0.0/24"
    )
    assert (await c.report("eth2"))["assignments"] == []  # until worker 0 has started
    await c.report("eth1", [{"task": "stack-0", "state": "Starting"}])
    reply = await c.report("eth2")
    ranks = [
        (a["task"], a["rendezvous"]["rank"], a["rendezvous"]["local_rank"])
        for a in reply["assignments"]
    ]
    assert ranks == [("stack-2", 2, 0), ("stack-3", 3, 1)]
    assert {a["rendezvous"]["local_world_size"] for a in reply["assignments"]} == {2}
    gpus = [set(a["assigned_gpu_ids"]) for a in reply["assignments"]]
    assert not gpus[0] & gpus[1]


async def test_exact_mode_waits_and_says_machines_are_short(cluster: Cluster) -> None:
    """The same run in Exact mode never stacks: it waits, and the reason names the machines."""
    c = cluster
    await c.workspace("vision")
    for name in ("eth1", "eth2"):
        await c.report(name)
    exact = {**ANY_16_ON_4, "node_selection": {"names": ["eth1", "eth2"]}}
    await c.submit("vision", "exact", gpus=0, requested_resources=exact)
    await c.run_pass()
    run = await _run(c, "exact")
    assert run["reason"] == (
        "the whole run does not fit: need 4 machines with room for a 4-GPU worker, 2 have it"
    )


async def test_cpu_only_any_count_three_shares_one_machine(cluster: Cluster) -> None:
    """A CPU-only run, `mode: Any`, `count: 3`, on one machine: three workers there."""
    c = cluster
    await c.workspace("vision")
    await c.report("cpu-1", gpus=0)
    ask = {"cpu_cores": 1, "node_selection": {"mode": "Any", "count": 3}}
    await c.submit("vision", "three", gpus=0, requested_resources=ask)
    assert (await c.run_pass()).placed == 1
    run = await _run(c, "three")
    assert [t["machine"] for t in run["tasks"]] == ["cpu-1"] * 3
    assert run["shape"]["why"] == "3 workers on cpu-1"
    first = await c.report("cpu-1")
    assert [a["task"] for a in first["assignments"]] == ["three-0"]
    reply = await c.report("cpu-1", [{"task": "three-0", "state": "Starting"}])
    assert [a["rendezvous"]["local_rank"] for a in reply["assignments"]] == [0, 1, 2]


async def test_array_elements_are_independent_one_worker_tasks(cluster: Cluster) -> None:
    """The issue's array: each element is one worker with the run's ask, all three run at
    once (concurrency counts live elements), the spread rule never refuses an element for
    another element's machine, and the landing names each element's machine."""
    c = cluster
    await c.workspace("vision")
    for name in ("m-cpu", "m-nodock"):
        await c.report(name, gpus=0)
    ask = {
        "cpu_cores": 1,
        "array": {"size": 3, "concurrency": 3},
        "node_selection": {"names": ["m-cpu", "m-nodock"]},
    }
    await c.submit("vision", "sweep", gpus=0, requested_resources=ask)
    assert (await c.run_pass()).placed == 3
    run = await _run(c, "sweep")
    tasks = [(t["name"], t["state"], t["machine"], t["cpu_cores"]) for t in run["tasks"]]
    # Scores tie (each element takes 1 of 96 cores), so each goes to the first by name.
    assert tasks == [
        ("sweep-0", "Assigned", "m-cpu", 1),
        ("sweep-1", "Assigned", "m-cpu", 1),
        ("sweep-2", "Assigned", "m-cpu", 1),
    ]
    assert run["landing"]["machines"] == ["m-cpu", "m-cpu", "m-cpu"]
    assert run["landing"]["where"] == "one machine per element"
    assert run["shape"] == {"tasks": 1, "gpus_each": 0, "why": "1 worker per element"}


async def test_array_concurrency_counts_live_elements(cluster: Cluster) -> None:
    """With concurrency 2, two elements run and the third waits for the array limit."""
    c = cluster
    await c.workspace("vision")
    await c.report("m-cpu", gpus=0)
    ask = {"cpu_cores": 1, "array": {"size": 3, "concurrency": 2}}
    await c.submit("vision", "sweep", gpus=0, requested_resources=ask)
    assert (await c.run_pass()).placed == 2
    run = await _run(c, "sweep")
    assert run["tasks"][2]["reason"] == "Array runs at most 2 tasks at once"


async def test_an_array_with_a_worker_count_is_refused(cluster: Cluster) -> None:
    """`machines` on an array contradicts one worker per element: 400, naming the field."""
    c = cluster
    await c.workspace("vision")
    spec = {
        "name": "sweep",
        "command": ["true"],
        "requested_resources": {"machines": 2, "array": {"size": 3}},
    }
    status, data = await c.call("POST", "/api/v1/runs", c.tokens["vision"], spec)
    assert status == 400
    assert "machines does not apply to an array run: each element is one worker" in str(data)
