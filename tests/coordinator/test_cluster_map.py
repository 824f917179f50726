"""`GET /api/v1/cluster/map`: each visible machine with every GPU's health and holder, compact,
and a member never learns another workspace's run names or machines outside its pools."""

from __future__ import annotations

from typing import Any

from astraeus.shared.views import ClusterMap

from .conftest import Cluster
from .fakes import report

H100 = "NVIDIA H100 80GB HBM3"
A10 = "NVIDIA A10"
RISK = {"state": "at_risk", "signals": [{"kind": "pcie_replay", "message": "PCIe replays"}]}
FAULT = {"state": "faulted", "signals": [{"kind": "xid", "message": "Xid 79"}]}


def ib_port(fabric: str | None, state: str = "ACTIVE", layer: str = "InfiniBand") -> dict[str, Any]:
    return {
        "device": "mlx5_0",
        "port": 1,
        "state": state,
        "link_layer": layer,
        "rate_gbps": 400,
        "fabric": fabric,
    }


async def put_report(c: Cluster, body: dict[str, Any]) -> None:
    """PUT a report built here (with health, ports, conditions) as the machine's agent."""
    payload = {"report": body, "updates": [], "logs": []}
    url = f"/api/v1/machines/{body['name']}/report"
    status, data = await c.call("PUT", url, c.agent_token(body["name"]), payload)
    assert status == 200, data


def machine(name: str, **extra: Any) -> dict[str, Any]:
    """What the map says of a machine, with the defaults of one that reported nothing special."""
    return {
        "name": name,
        "state": "Up",
        "site": "127.0.0.0/24",
        "rack": None,
        "fabric": None,
        "network": "Ethernet",
        "nvlink_domain": None,
        "ethernet_mbps": None,
        "cordoned": False,
        "cordon_reason": None,
        "conditions": [],
        "gpus": [],
        **extra,
    }


def gpus(n: int, model: int = 0, **by_index: tuple[str, Any]) -> list[list[Any]]:
    """`n` GPUs as the map lists them, [index, model, health, run]; `g<i>=(field, value)`
    changes GPU i's health or run."""
    listed: list[list[Any]] = [[i, model, "healthy", None] for i in range(n)]
    for index, (field, value) in by_index.items():
        listed[int(index.removeprefix("g"))][{"health": 2, "run": 3}[field]] = value
    return listed


async def test_every_machine_and_gpu_with_its_health_and_holder(fake_cluster: Cluster) -> None:
    """An admin's map: machines by name, each GPU's model (listed once), health and holding run
    (listed once, named with its workspace); network, fabric, rack, NVLink domain, the fastest
    Ethernet that is up, cordon, conditions; a machine that never reported is Down, no GPUs."""
    c = fake_cluster
    await c.workspace("vision")
    labels = {"topology.astraeus.io/rack": "r1", "topology.astraeus.io/fabric": "ib-0"}
    ib = report("gpu-01", gpus=4, labels=labels)
    ib["gpus"][3]["health"] = RISK
    ib["rdma_ports"] = [ib_port("ib-fe80")]
    ib["network_interfaces"] = [
        {"name": "eth0", "state": "up", "speed_mbps": 25000},
        {"name": "eth1", "state": "up", "speed_mbps": 100000},
        {"name": "eth2", "state": "down", "speed_mbps": 400000},
        {"name": "ib0", "kind": "infiniband", "state": "up", "speed_mbps": 400000},
    ]
    await put_report(c, ib)
    roce = report("gpu-02", gpus=2, model=A10, labels={"topology.astraeus.io/site": "fra-1"})
    roce["gpus"][1]["health"] = FAULT
    roce["gpus"][0]["nvlink_domain"] = "cafe/1"
    roce["rdma_ports"] = [ib_port(None, layer="Ethernet"), ib_port("ib-x", state="DOWN")]
    roce["conditions"] = ["MemoryPressure"]
    await put_report(c, roce)
    c.agent_token("gpu-03")
    await c.call("POST", "/api/v1/machines/gpu-02/cordon", body={"reason": "firmware update"})
    await c.submit("vision", "train", gpus=2)
    await c.run_pass()

    status, answer = await c.call("GET", "/api/v1/cluster/map")
    assert status == 200
    ClusterMap.model_validate(answer)
    assert answer == {
        "models": [H100, A10],
        "runs": [{"name": "train", "workspace": "vision"}],
        "machines": [
            machine(
                "gpu-01",
                rack="r1",
                fabric="ib-0",
                network="InfiniBand",
                ethernet_mbps=100000,
                gpus=gpus(4, g0=("run", 0), g1=("run", 0), g3=("health", "at_risk")),
            ),
            machine(
                "gpu-02",
                site="fra-1",
                network="RoCE",
                nvlink_domain="cafe/1",
                cordoned=True,
                cordon_reason="firmware update",
                conditions=["MemoryPressure"],
                gpus=gpus(2, model=1, g1=("health", "faulted")),
            ),
            machine("gpu-03", state="Down", site=None),
        ],
    }


async def test_the_fabric_an_unlabelled_machines_ports_report(fake_cluster: Cluster) -> None:
    """Without a fabric label, the fabric is what its active InfiniBand ports report."""
    c = fake_cluster
    body = report("gpu-01", gpus=1)
    body["rdma_ports"] = [ib_port("ib-fe80")]
    await put_report(c, body)
    _, answer = await c.call("GET", "/api/v1/cluster/map")
    assert (answer["machines"][0]["fabric"], answer["machines"][0]["network"]) == (
        "ib-fe80",
        "InfiniBand",
    )


async def test_a_member_sees_its_pools_and_no_other_workspaces_run_names(
    fake_cluster: Cluster,
) -> None:
    """A member sees the machines of its workspace's pools only, its own runs by name, and
    another workspace's run as one unnamed entry; an admin sees every name."""
    c = fake_cluster
    vision = await c.workspace("vision", pools=["h100"])
    await c.workspace("beta")
    await c.report("gpu-01", gpus=4)
    await c.report("gpu-02", gpus=4)
    await c.label("gpu-01", pool="h100")  # pools are an admin's to give, never an agent's
    await c.label("gpu-02", pool="a100")
    await c.submit("beta", "beta-secret-project-x", gpus=2)
    await c.submit("vision", "train", gpus=1)
    await c.run_pass()

    status, answer = await c.call("GET", "/api/v1/cluster/map", vision)
    assert status == 200
    assert [m["name"] for m in answer["machines"]] == ["gpu-01"]
    assert answer["runs"] == [
        {"name": None, "workspace": None},
        {"name": "train", "workspace": "vision"},
    ]
    assert [g[3] for g in answer["machines"][0]["gpus"]] == [0, 0, 1, None]
    _, raw = await c.call("GET", "/api/v1/cluster/map", vision)
    assert "beta" not in str(raw)

    _, everything = await c.call("GET", "/api/v1/cluster/map")
    assert [m["name"] for m in everything["machines"]] == ["gpu-01", "gpu-02"]
    assert [r["name"] for r in everything["runs"]] == ["beta-secret-project-x", "train"]


async def test_a_lost_tasks_gpus_stay_in_use_while_held(fake_cluster: Cluster) -> None:
    """A task Lost with its machine keeps its GPUs until the agent says the worker is gone: the
    map shows them in use by its run on the Down machine, not free."""
    c = fake_cluster
    await c.workspace("vision")
    await c.report("gpu-01", gpus=8)
    await c.submit("vision", "finetune", gpus=8)
    await c.run_pass()
    await c.report("gpu-01", [{"task": "finetune-0", "state": "Running"}], tasks=["finetune-0"])
    c.clock.advance(301)
    assert (await c.run_pass()).lost == 1
    _, answer = await c.call("GET", "/api/v1/cluster/map")
    (machine,) = answer["machines"]
    assert machine["state"] == "Down"
    assert answer["runs"] == [{"name": "finetune", "workspace": "vision"}]
    assert [g[3] for g in machine["gpus"]] == [0] * 8


async def test_agents_may_not_read_the_map(fake_cluster: Cluster) -> None:
    """An agent's token is refused: agents only report."""
    c = fake_cluster
    await c.report("gpu-01")
    status, data = await c.call("GET", "/api/v1/cluster/map", c.agent_token("gpu-01"))
    assert (status, data["error"]) == (403, "an agent token may only report for its machine")
