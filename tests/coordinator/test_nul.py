"""NUL characters in a worker's output: kept as U+FFFD, never breaking a report or a pass."""

from __future__ import annotations

from .conftest import Cluster


async def test_a_worker_printing_a_nul_breaks_no_report(cluster: Cluster) -> None:
    """A worker's output holding a NUL byte (binary output, common enough): the chunk is kept
    with U+FFFD in its place, as invalid UTF-8 is. On PostgreSQL, whose text holds no NUL, the
    machine's report carrying it was refused with a 500 every time the agent sent it again, so
    the machine went Down and its tasks Lost; passes go on either way."""
    c = cluster
    member = await c.workspace("vision")
    await c.report("gpu-01")
    await c.submit("vision", "nul", gpus=1, time_limit_seconds=600)
    await c.submit("vision", "plain", gpus=1)
    assert (await c.run_pass()).placed == 2
    await c.report(
        "gpu-01",
        [{"task": "nul-0", "state": "Running"}],
        logs=[{"task": "nul-0", "offset": 0, "data": "a\u0000b\n"}],
    )
    await c.submit("vision", "after", gpus=1)
    assert (await c.run_pass()).placed == 1
    status, logs = await c.call("GET", "/api/v1/tasks/nul-0/logs", member)
    assert status == 200, logs
    assert logs["data"] == "a\ufffdb\n"
