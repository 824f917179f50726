"""What a member may see: its own workspace's names and its pools' machines, nothing else.

Another workspace's run or task is `a run of another workspace`; admins see every name."""

from __future__ import annotations

import json
from typing import Any

from .conftest import Cluster

OTHER = "a run of another workspace"


async def _two_tenants(c: Cluster) -> tuple[str, str]:
    """gpu-01 (pool shared) runs beta's `beta-secret-project-x` on 4 GPUs; gpu-02 is in beta's
    own pool `secret`. vision may use `shared` only."""
    vision = await c.workspace("vision", pools=["shared"])
    beta = await c.workspace("beta", pools=["shared", "secret"])
    for machine, pool in (("gpu-01", "shared"), ("gpu-02", "secret")):
        await c.report(machine)
        await c.label(machine, pool=pool)
    one_machine = {"node_selection": {"names": ["gpu-01"]}}
    await c.submit("beta", "beta-secret-project-x", gpus=4, requested_resources=one_machine)
    await c.run_pass()
    return vision, beta


async def test_machine_views_hide_other_workspaces_names(cluster: Cluster) -> None:
    """A member's machine list and page name its own runs and tasks only; an admin's name all."""
    c = cluster
    vision, beta = await _two_tenants(c)
    await c.submit("vision", "mine", gpus=2, requested_resources={})
    await c.run_pass()
    _, page = await c.call("GET", "/api/v1/machines/gpu-01", vision)
    assert page["runs"] == ["mine", OTHER]
    holders = sorted({gpu["task"] for gpu in page["gpus"] if gpu["task"]})
    assert holders == [OTHER, "mine-0"]
    _, listed = await c.call("GET", "/api/v1/machines", vision)
    assert [(m["name"], m["runs"]) for m in listed["machines"]] == [("gpu-01", ["mine", OTHER])]
    _, seen = await c.call("GET", "/api/v1/machines/gpu-01", beta)
    assert seen["runs"] == ["beta-secret-project-x", OTHER]
    _, admin = await c.call("GET", "/api/v1/machines/gpu-01")
    assert admin["runs"] == ["beta-secret-project-x", "mine"]
    assert "beta-secret-project-x-0" in {gpu["task"] for gpu in admin["gpus"]}


async def test_queue_reasons_never_name_another_workspace_s_run(cluster: Cluster) -> None:
    """vision's run that would fit only on the machine the head of the queue (beta's) waits for
    is `Queued behind a run of another workspace`; its kind, as data, names no run either."""
    c = cluster
    vision, _ = await _two_tenants(c)
    whole = {**_gpus(8, per_machine=8), "node_selection": {"names": ["gpu-01"]}}
    await c.submit("beta", "beta-big", gpus=0, requested_resources=whole)
    await c.submit("vision", "small", gpus=2, requested_resources={})
    await c.run_pass()
    _, run = await c.call("GET", "/api/v1/runs/small", vision)
    assert (run["state"], run["reason"]) == ("Pending", f"Queued behind {OTHER}")
    assert run["reason_kind"] == "QueuedBehind"
    _, task = await c.call("GET", "/api/v1/tasks/small-0", vision)
    assert (task["reason"], task["reason_kind"]) == (f"Queued behind {OTHER}", "QueuedBehind")
    assert "beta-big" not in json.dumps([run, task])


async def test_explanations_list_only_the_workspace_s_machines(cluster: Cluster) -> None:
    """A run that fits nowhere is explained by the machines of its workspace's pools alone:
    counts, nodes, closest and the rejections' data never mention a machine outside them."""
    c = cluster
    vision, _ = await _two_tenants(c)
    await c.submit("vision", "huge", gpus=0, requested_resources=_gpus(16, per_machine=8))
    await c.run_pass()
    _, task = await c.call("GET", "/api/v1/tasks/huge-0", vision)
    placement: dict[str, Any] = task["placement"]
    names = [node["name"] for node in placement["nodes"]]
    counts = (placement["checked_nodes"], placement["ready_nodes"], placement["down_nodes"])
    assert (names, counts) == (["gpu-01"], (1, 1, 0))
    assert task["reason"] == "the workspace's machines have 8 GPUs that match; the run asks for 16"
    assert task["reason_kind"] == "ClusterTooSmall"
    assert task["rejections"] == [
        {"filter": "topology", "code": "ClusterTooSmall", "room": False, "machines": ["gpu-01"]}
    ]
    status, dry = await c.call(
        "POST",
        "/api/v1/runs?dry_run=true",
        vision,
        {"name": "again", "command": ["x"], "requested_resources": _gpus(16, per_machine=8)},
    )
    assert status == 200
    assert [node["name"] for node in dry["placement"]["nodes"]] == ["gpu-01"]
    assert [group["machines"] for group in dry["rejections"]] == [["gpu-01"]]


def _gpus(count: int, *, per_machine: int) -> dict[str, Any]:
    return {"gpu_requests": {"count": count, "min_per_machine": per_machine}}


async def test_a_drive_of_another_pool_reads_as_one_that_does_not_exist(cluster: Cluster) -> None:
    """beta's pool `secret` holds the drive `beta-datasets`; vision (pool `shared`) asking for
    it on gpu-01 is told exactly what a drive nobody has gets: the member learns nothing of other
    pools' drives. beta, whose pools hold it, is told it is not reachable from gpu-01."""
    c = cluster
    vision, beta = await _two_tenants(c)
    drive = {"name": "beta-datasets", "path": "/mnt/beta", "capacity_bytes": 1, "free_bytes": 1}
    await c.report("gpu-02", drives=[drive])
    await c.label("gpu-02", pool="secret")

    async def why(token: str, name: str) -> str:
        ask = {
            "gpu_requests": {"count": 1},
            "drives": [{"name": name, "mount_path": "/data"}],
            "node_selection": {"names": ["gpu-01"]},
        }
        body = {"name": "d", "command": ["x"], "requested_resources": ask}
        status, dry = await c.call("POST", "/api/v1/runs?dry_run=true", token, body)
        assert status == 200, dry
        return str(dry["placement"]["nodes"][0]["reasons"])

    told = await why(vision, "beta-datasets")
    nobody = await why(vision, "nobody-has-this")
    assert told == nobody.replace("nobody-has-this", "beta-datasets")
    assert "drive beta-datasets does not exist" in told
    assert "drive beta-datasets is not reachable from this machine" in await why(
        beta, "beta-datasets"
    )
