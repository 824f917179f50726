"""Two workspaces run tasks of the same name on one machine: each sees, cancels and ends only
its own (between coordinator and agent a task is named by its cluster-unique uid)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from helpers import until_async

from .rig import Cluster, worker

ONE_GPU = {"gpu_requests": {"count": 1}}


async def _job3(c: Cluster, token: str, says: str, release: Path, mode: str) -> None:
    spec = {
        "name": "job3",
        "command": worker(says, release),
        "env": {"SECRET": says},
        "requested_resources": {**ONE_GPU, "node_selection": {"mode": mode}},
    }
    await c.ok("POST", "/api/v1/runs", token, spec)


def _in_state(c: Cluster, token: str, state: str) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return (await c.task(token, "job3-0"))["state"] == state

    return check


def _logged(c: Cluster, token: str) -> Callable[[], Awaitable[str]]:
    """The worker's own output in the task's log, without the agent's `astraeus:` notes (a
    plain-process GPU worker's log starts with what it lacks)."""

    async def check() -> str:
        text = str((await c.ok("GET", "/api/v1/tasks/job3-0/logs", token))["data"])
        return "".join(line for line in text.splitlines(True) if not line.startswith("astraeus:"))

    return check


async def test_same_task_name_in_two_workspaces_stays_apart(
    cluster: Cluster, tmp_path: Path
) -> None:
    """alpha's and beta's `job3-0` both run on m1: each log holds its own output only, beta's
    cancel stops beta's worker alone, and alpha's task runs and ends as alpha's."""
    c = cluster
    alpha = await c.workspace("alpha", ["shared"])
    beta = await c.workspace("beta", ["shared"])
    m1 = await c.machine("m1", pool="shared")
    await _job3(c, alpha, "ALPHA-SECRET=a1", tmp_path / "alpha-done", "Exact")
    await c.run_pass()
    await until_async("alpha's job3-0 to run", _in_state(c, alpha, "Running"))
    await _job3(c, beta, "BETA-SECRET=b2", tmp_path / "beta-done", "Any")
    await c.run_pass()
    await until_async("beta's job3-0 to run", _in_state(c, beta, "Running"))
    assert await until_async("beta's log", _logged(c, beta)) == "BETA-SECRET=b2\n"
    assert await until_async("alpha's log", _logged(c, alpha)) == "ALPHA-SECRET=a1\n"
    workers = {r.assignment.workspace: r for r in m1.runner.records.values()}
    assert sorted(workers) == ["alpha", "beta"]

    await c.ok("POST", "/api/v1/runs/job3/cancel", beta)
    await until_async("beta's worker to stop", _in_state(c, beta, "Cancelled"))
    assert workers["beta"].stop_reason == "cancelled"
    assert (workers["alpha"].stop_reason, workers["alpha"].state.value) == (None, "Running")
    assert m1.runner.launcher.alive(workers["alpha"])

    (tmp_path / "alpha-done").write_text("")
    await until_async("alpha's job3-0 to end", _in_state(c, alpha, "Succeeded"))
    assert await _logged(c, beta)() == "BETA-SECRET=b2\n"
    assert c.store is not None
    assert c.store.database.read("SELECT count(*) AS n FROM gpu_holds") == [{"n": 0}]


async def test_exact_spread_is_about_one_workspace_s_run(cluster: Cluster, tmp_path: Path) -> None:
    """In Exact mode alpha's `job3` on m1 does not keep beta's `job3` off m1: the spread rule
    is about workers of the same run, and run names repeat across workspaces."""
    c = cluster
    alpha = await c.workspace("alpha", ["shared"])
    beta = await c.workspace("beta", ["shared"])
    await c.machine("m1", pool="shared")
    await _job3(c, alpha, "ALPHA", tmp_path / "done", "Exact")
    await c.run_pass()
    await _job3(c, beta, "BETA", tmp_path / "done", "Exact")
    await c.run_pass()
    task = await c.task(beta, "job3-0")
    assert (task["machine"], task["reason"], task["placement"]) == ("m1", None, None)
    await until_async("beta's job3-0 to run", _in_state(c, beta, "Running"))
    (tmp_path / "done").write_text("")
    await until_async("alpha's job3-0 to end", _in_state(c, alpha, "Succeeded"))
    await until_async("beta's job3-0 to end", _in_state(c, beta, "Succeeded"))
