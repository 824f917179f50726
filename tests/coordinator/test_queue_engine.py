"""The queue rules with the real placement engine: the head's hold, and a gang's rendezvous."""

from __future__ import annotations

from .conftest import Cluster


async def test_head_holds_its_machine_with_the_real_engine(cluster: Cluster) -> None:
    """The engine names the machine a waiting 8-GPU run wants; a 2-GPU run behind it that would
    fit there is `Queued behind` it, and starts on another machine when one has room."""
    c = cluster
    member = await c.workspace("vision")
    await c.report("gpu-01")
    await c.submit("vision", "filler", gpus=4)
    await c.run_pass()
    await c.submit("vision", "big", gpus=8)
    await c.submit("vision", "small", gpus=2)
    assert (await c.run_pass()).placed == 0
    _, big = await c.call("GET", "/api/v1/runs/big", member)
    assert big["reason"] == "Next to run: No machine fits: 1 of 1 machines ready"
    assert big["reason_kind"] == "NextToRun"
    _, task = await c.call("GET", "/api/v1/tasks/big-0", member)
    assert task["placement"]["closest"] == "gpu-01"
    assert task["rejections"] == [
        {"filter": "gpus", "code": "InsufficientGPUs", "room": True, "machines": ["gpu-01"]}
    ]
    _, small = await c.call("GET", "/api/v1/runs/small", member)
    assert (small["reason"], small["reason_kind"]) == ("Queued behind big", "QueuedBehind")
    await c.report("gpu-02", gpus=2)
    assert (await c.run_pass()).placed == 1
    _, small = await c.call("GET", "/api/v1/runs/small", member)
    assert (small["state"], small["tasks"][0]["machine"]) == ("Running", "gpu-02")


async def test_rejections_group_machines_by_filter_code_and_room(cluster: Cluster) -> None:
    """Each machine's reason is carried as data next to its text: machines are grouped by the
    filter that keeps them out, its code, and whether it is about room, in name order; the
    guide's `.placement` keeps exactly its fields."""
    c = cluster
    member = await c.workspace("vision")
    for name, gpus in (("gpu-01", 8), ("gpu-02", 4), ("gpu-03", 8), ("gpu-04", 8)):
        await c.report(name, gpus=gpus)
    await c.call("POST", "/api/v1/machines/gpu-03/cordon", body={"reason": "firmware update"})
    await c.submit("vision", "filler", gpus=8)
    await c.run_pass()
    ask = {
        "gpu_requests": {"count": 8, "min_per_machine": 8},
        "node_selection": {"names": ["gpu-01", "gpu-02", "gpu-03"]},
    }
    await c.submit("vision", "finetune", gpus=0, requested_resources=ask)
    await c.run_pass()
    _, task = await c.call("GET", "/api/v1/tasks/finetune-0", member)
    assert task["reason_kind"] == "NoMachineFits"
    assert set(task["placement"]) == {
        "checked_nodes",
        "ready_nodes",
        "down_nodes",
        "closest",
        "nodes",
        "evaluated_at",
    }
    assert [set(node) for node in task["placement"]["nodes"]] == [{"name", "state", "reasons"}] * 4
    assert task["rejections"] == [
        {"filter": "gpus", "code": "InsufficientGPUs", "room": True, "machines": ["gpu-01"]},
        {"filter": "gpus", "code": "TooFewGPUs", "room": False, "machines": ["gpu-02"]},
        {"filter": "accepting", "code": "Cordoned", "room": False, "machines": ["gpu-03"]},
        {"filter": "selection", "code": "NotNamed", "room": False, "machines": ["gpu-04"]},
    ]


async def test_a_gang_gets_one_rendezvous(cluster: Cluster) -> None:
    """A 16-GPU run on two 8-GPU machines: two workers, one master at the range's first port,
    ranks 0 and 1; worker 1 is sent once worker 0 has started."""
    c = cluster
    await c.workspace("vision")
    await c.report("gpu-01")
    await c.report("gpu-02")
    await c.submit("vision", "pretrain", gpus=16)
    assert (await c.run_pass()).placed == 1
    first = await c.report("gpu-01")
    replies = [first, await c.report("gpu-02", [])]
    assert replies[1]["assignments"] == []  # worker 1 waits until worker 0 has started
    await c.report("gpu-01", [{"task": "pretrain-0", "state": "Starting"}])
    replies[1] = await c.report("gpu-02")
    rendezvous = [r["assignments"][0]["rendezvous"] for r in replies]
    assert [r["rank"] for r in rendezvous] == [0, 1]
    assert [r["node_rank"] for r in rendezvous] == [0, 1]
    assert {r["world_size"] for r in rendezvous} == {2}
    assert {r["master_addr"] for r in rendezvous} == {"127.0.0.1"}
    assert {r["master_port"] for r in rendezvous} == {29500}
    _, run = await c.call("GET", "/api/v1/runs/pretrain", c.tokens["vision"])
    assert (run["shape"]["tasks"], run["shape"]["gpus_each"]) == (2, 8)


async def test_a_head_in_one_pool_never_lifts_the_hold_in_another(cluster: Cluster) -> None:
    """Holds are per set of machines: `old` waits as the head in pool vault, and `big` waits
    for room in pool h100 behind it; `big` is a head there too, so another workspace's 2-GPU
    run that would fit beside h-01's filler waits behind it instead of taking its GPUs (the
    issue's report: one head in `vault` let a small run take what `big` waited for)."""
    c = cluster
    vault = await c.workspace("vault-team", pools=["vault"], max_priority=10)
    big_team = await c.workspace("big-team", pools=["h100"], max_priority=10)
    small_team = await c.workspace("small-team", pools=["h100"])
    for machine, pool in (("v-01", "vault"), ("h-01", "h100")):
        await c.report(machine)
        await c.label(machine, pool=pool)
    await c.submit("vault-team", "vault-filler", gpus=8)
    await c.submit("big-team", "h100-filler", gpus=4)
    assert (await c.run_pass()).placed == 2
    await c.submit("vault-team", "old", gpus=8, priority=10)
    await c.submit("big-team", "big", gpus=8, priority=10)
    await c.submit("small-team", "small", gpus=2)
    assert (await c.run_pass()).placed == 0
    _, old = await c.call("GET", "/api/v1/runs/old", vault)
    assert (old["reason_kind"], old["reason"]) == (
        "NextToRun",
        "Next to run: No machine fits: 1 of 1 machines ready",
    )
    _, big = await c.call("GET", "/api/v1/runs/big", big_team)
    assert (big["reason_kind"], big["reason"]) == (
        "NextToRun",
        "Next to run: No machine fits: 1 of 1 machines ready",
    )
    _, small = await c.call("GET", "/api/v1/runs/small", small_team)
    assert (small["state"], small["reason_kind"]) == ("Pending", "QueuedBehind")
    assert small["reason"] == "Queued behind a run of another workspace"
    _, machine = await c.call("GET", "/api/v1/machines/h-01")
    assert machine["gpus_free"] == 4


async def test_a_run_waits_behind_the_head_holding_the_machine_it_would_use(
    cluster: Cluster,
) -> None:
    """Two heads in two pools: a run of big-team's own that would fit only on h-01 is queued
    behind `big` (named: its own workspace's run), not behind vault's head."""
    c = cluster
    await c.workspace("vault-team", pools=["vault"], max_priority=10)
    big_team = await c.workspace("big-team", pools=["h100"], max_priority=10)
    for machine, pool in (("v-01", "vault"), ("h-01", "h100")):
        await c.report(machine)
        await c.label(machine, pool=pool)
    await c.submit("vault-team", "vault-filler", gpus=8)
    await c.submit("big-team", "h100-filler", gpus=4)
    await c.run_pass()
    await c.submit("vault-team", "old", gpus=8, priority=10)
    await c.submit("big-team", "big", gpus=8, priority=10)
    await c.submit("big-team", "little", gpus=2)
    assert (await c.run_pass()).placed == 0
    _, little = await c.call("GET", "/api/v1/runs/little", big_team)
    assert (little["reason_kind"], little["reason"]) == ("QueuedBehind", "Queued behind big")
