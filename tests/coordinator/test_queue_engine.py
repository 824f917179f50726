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
    _, task = await c.call("GET", "/api/v1/tasks/big-0", member)
    assert task["placement"]["closest"] == "gpu-01"
    _, small = await c.call("GET", "/api/v1/runs/small", member)
    assert small["reason"] == "Queued behind big"
    await c.report("gpu-02", gpus=2)
    assert (await c.run_pass()).placed == 1
    _, small = await c.call("GET", "/api/v1/runs/small", member)
    assert (small["state"], small["tasks"][0]["machine"]) == ("Running", "gpu-02")


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
