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


async def test_a_nul_anywhere_in_a_run_spec_is_refused(cluster: Cluster) -> None:
    """A run spec's strings hold no NUL: one stored would break every PostgreSQL read that
    casts the spec to `jsonb` (the pass's), for every workspace."""
    c = cluster
    member = await c.workspace("vision")
    for field, value, problem in (
        ("image", "repo/x\u0000y:1", "is not an OCI image reference"),
        (
            "requested_resources",
            {"node_selection": {"match_labels": {"k": "v\u0000"}}},
            "node_selection.match_labels.k: must not contain a NUL byte",
        ),
        (
            "requested_resources",
            {"drives": [{"name": "data\u0000"}]},
            "drives[0].name: must not contain a NUL byte",
        ),
    ):
        body = {"name": "nul", "command": ["true"], field: value}
        status, answer = await c.call("POST", "/api/v1/runs", member, body)
        assert status == 400, (field, answer)
        assert answer["fields"][0]["field"] == field
        assert problem in answer["fields"][0]["problem"]
