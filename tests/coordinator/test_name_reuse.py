"""A run's name used again once the run has ended (issue 30), and `DELETE /runs/{name}`, on each
engine: the ended run is retired under its uid (out of the name's way), a live run keeps its
name with advice that works, the old run's logs never show under the new one, and no name of
another workspace is reached."""

from __future__ import annotations

from typing import Any

from .conftest import Cluster

RUN = "/api/v1/runs/finetune"


async def _running(c: Cluster, workspace: str = "vision") -> dict[str, Any]:
    """`finetune` (1 GPU) of `workspace` placed on gpu-01 and Running, with a line of output."""
    run = await c.submit(workspace, "finetune", gpus=1)
    assert (await c.run_pass()).placed == 1
    await c.report(
        "gpu-01",
        [{"task": "finetune-0", "state": "Running"}],
        logs=[{"task": "finetune-0", "offset": 0, "data": "old secret\n"}],
        tasks=["finetune-0"],
        gpus=2,
    )
    return run


async def test_an_ended_runs_name_is_used_again_and_its_history_kept(
    store_cluster: Cluster,
) -> None:
    c = store_cluster
    member = await c.workspace("vision")
    await c.report("gpu-01", gpus=2)
    old = await _running(c)
    status, refused = await c.call(
        "POST", "/api/v1/runs", member, {"name": "finetune", "command": ["x"]}
    )
    assert status == 409, refused
    assert refused["error"] == "a run named 'finetune' is Running in workspace vision"
    assert "cancel that run first" in refused["fields"][0]["problem"]

    status, cancelled = await c.call("POST", f"{RUN}/cancel", member)
    assert (status, cancelled["state"]) == (200, "Cancelled")
    new = await c.submit("vision", "finetune", gpus=1)
    assert new["uid"] != old["uid"]
    assert new["state"] == "Pending"

    status, shown = await c.call("GET", RUN, member)
    assert (status, shown["uid"]) == (200, new["uid"])
    status, listed = await c.call("GET", "/api/v1/runs", member)
    assert [run["uid"] for run in listed["runs"]] == [new["uid"]]
    status, logs = await c.call("GET", "/api/v1/tasks/finetune-0/logs", member)
    assert (status, logs["data"]) == (200, "")  # the old run's output is not the new one's
    status, task = await c.call("GET", "/api/v1/tasks/finetune-0", member)
    assert (status, task["state"]) == (200, "Pending")

    # The old run is kept under its uid: its task still stops and still holds its GPU until
    # its agent says the worker is gone.
    kept = c.store.database.read_one(
        "SELECT name, state, retired_at FROM runs WHERE uid = ?", (old["uid"],)
    )
    assert kept is not None
    assert (kept["name"], kept["state"]) == (f"finetune~{old['uid']}", "Cancelled")
    assert kept["retired_at"] is not None
    held = c.store.runs.gpu_owners("gpu-01")
    assert list(held.values()) == [("vision", "finetune-0")]
    reply = await c.report("gpu-01", tasks=["finetune-0"], gpus=2)
    stopping = [(a["run"], a["task_uid"], a["cancel"]) for a in reply["assignments"]]
    assert stopping == [("finetune", c.uid("gpu-01", "finetune-0"), True)]


async def test_a_name_of_another_workspace_is_never_reached(store_cluster: Cluster) -> None:
    """`finetune` of `vision` ended, `finetune` of `audio` running: vision's reuse and delete
    touch vision's run only."""
    c = store_cluster
    vision = await c.workspace("vision")
    audio = await c.workspace("audio")
    await c.report("gpu-01", gpus=2)
    theirs = await _running(c, "audio")
    mine = await c.submit("vision", "finetune", gpus=0)
    status, _ = await c.call("POST", f"{RUN}/cancel", vision)
    assert status == 200
    status, again = await c.call(
        "POST", "/api/v1/runs", vision, {"name": "finetune", "command": ["x"]}
    )
    assert status == 201, again
    status, _ = await c.call("POST", f"{RUN}/cancel", vision)
    status, gone = await c.call("DELETE", RUN, vision)
    assert (status, gone["uid"]) == (200, again["uid"])

    status, still = await c.call("GET", RUN, audio)
    assert (status, still["uid"], still["state"]) == (200, theirs["uid"], "Running")
    status, logs = await c.call("GET", "/api/v1/tasks/finetune-0/logs", audio)
    assert logs["data"] == "old secret\n"
    status, refused = await c.call("DELETE", RUN, audio)
    assert status == 409, refused
    assert refused["fields"] == [
        {"field": "name", "problem": "has not ended; cancel that run first, then delete it"}
    ]
    assert mine["uid"] not in (theirs["uid"], again["uid"])


async def test_delete_removes_an_ended_run_and_its_logs(store_cluster: Cluster) -> None:
    c = store_cluster
    member = await c.workspace("vision")
    await c.report("gpu-01", gpus=2)
    await _running(c)
    await c.report(
        "gpu-01", [{"task": "finetune-0", "state": "Succeeded", "exit_code": 0}], tasks=[], gpus=2
    )
    status, done = await c.call("GET", RUN, member)
    assert done["state"] == "Succeeded"

    status, gone = await c.call("DELETE", RUN, member)
    assert (status, gone["state"], gone["uid"]) == (200, "Succeeded", done["uid"])
    assert (await c.call("GET", RUN, member))[0] == 404
    assert (await c.call("GET", "/api/v1/tasks/finetune-0/logs", member))[0] == 404
    assert (await c.call("DELETE", RUN, member))[0] == 404
    assert (await c.call("GET", "/api/v1/runs", member))[1]["runs"] == []
    left = c.store.database.read_one("SELECT count(*) AS n FROM logs")
    assert left is not None
    assert left["n"] == 0
