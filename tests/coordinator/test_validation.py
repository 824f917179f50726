"""Bad input gets a 4xx whose JSON body names the field and the problem."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Cluster


@pytest.mark.parametrize(
    ("spec", "field", "problem"),
    [
        (
            {"name": "Bad_Name", "command": ["x"]},
            "name",
            "'Bad_Name' does not match ^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$",
        ),
        ({"name": "a"}, "command", "is required"),
        (
            {"name": "a", "command": ["x"], "env": {"MASTER_PORT": "29500x"}},
            "env",
            "MASTER_PORT is '29500x': a port is a whole number from 1 to 65535",
        ),
        (
            {"name": "a", "command": ["x"], "env": {"PET_MASTER_PORT": "65536"}},
            "env",
            "PET_MASTER_PORT is '65536': a port is a whole number from 1 to 65535",
        ),
        (
            {"name": "a", "command": ["x"], "requested_resources": {"gpu_requests": {"count": -1}}},
            "requested_resources.gpu_requests.count",
            "must be at least 0, got -1",
        ),
        (
            {"name": "a", "command": ["x"], "requested_resources": {"gpu_request": {}}},
            "requested_resources.gpu_request",
            "unknown field; did you mean gpu_requests?",
        ),
        (
            {
                "name": "a",
                "command": ["x"],
                "requested_resources": {"gpu_requests": {"count": 12}, "machines": 5},
            },
            "requested_resources",
            "Cannot plan workers: cannot evenly distribute 12 gpus across 5 machines",
        ),
        (
            {"name": "a", "image": "--privileged", "command": ["--volume=/:/host", "alpine"]},
            "image",
            "'--privileged' is not an OCI image reference: use [registry/]name[:tag][@digest], "
            "e.g. nvcr.io/nvidia/pytorch:24.08-py3",
        ),
    ],
    ids=[
        "name",
        "missing-command",
        "bad-master-port",
        "bad-pet-master-port",
        "negative-count",
        "typo",
        "uneven",
        "image-as-a-flag",
    ],
)
async def test_bad_run_specs_name_field_and_problem(
    fake_cluster: Cluster, spec: dict[str, Any], field: str, problem: str
) -> None:
    """A bad RunSpec is a 400 listing the field and the problem, and nothing is stored."""
    c = fake_cluster
    member = await c.workspace("vision")
    status, data = await c.call("POST", "/api/v1/runs", member, spec)
    assert status == 400
    assert data["error"] == "invalid RunSpec"
    assert {"field": field, "problem": problem} in data["fields"]
    assert c.store.database.read("SELECT count(*) AS n FROM runs")[0]["n"] == 0


async def test_name_taken_in_workspace_is_409(fake_cluster: Cluster) -> None:
    """A second run with a name already used in the workspace is refused with 409."""
    c = fake_cluster
    member = await c.workspace("vision")
    await c.submit("vision", "finetune")
    status, data = await c.call(
        "POST", "/api/v1/runs", member, {"name": "finetune", "command": ["x"]}
    )
    assert status == 409
    assert data["fields"] == [
        {
            "field": "name",
            "problem": "is already used in this workspace; by a run that is Pending: cancel"
            " that run first (the name of a run that has ended may be used again), or pick"
            " another name",
        }
    ]


async def test_priority_above_the_workspace_limit_is_refused(fake_cluster: Cluster) -> None:
    """A run may not ask for more priority than its workspace may use."""
    c = fake_cluster
    member = await c.workspace("vision", max_priority=10)
    status, data = await c.call(
        "POST", "/api/v1/runs", member, {"name": "a", "command": ["x"], "priority": 11}
    )
    assert status == 400
    assert data["fields"] == [
        {"field": "priority", "problem": "at most 10 in workspace vision, got 11"}
    ]


@pytest.mark.parametrize(
    ("raw", "content_type", "status", "error"),
    [
        (b"{not json", "application/json", 400, "body is not valid JSON"),
        (b"[1, 2]", "application/json", 400, "body must be a JSON object"),
        (
            b"name=a",
            "application/x-www-form-urlencoded",
            415,
            "send a JSON body with Content-Type: application/json",
        ),
    ],
    ids=["broken-json", "not-an-object", "form"],
)
async def test_unreadable_bodies_are_4xx(
    fake_cluster: Cluster, raw: bytes, content_type: str, status: int, error: str
) -> None:
    """Bodies that are not a JSON object get a 4xx with a JSON error."""
    c = fake_cluster
    member = await c.workspace("vision")
    response = await c.client.post(
        "/api/v1/runs", data=raw, headers={**c.auth(member), "Content-Type": content_type}
    )
    assert response.status == status
    assert (await response.json())["error"].startswith(error)


async def test_bodies_are_size_limited(aiohttp_client: Any, tmp_path: Any) -> None:
    """A body over the limit is a 413 with a JSON error, not a 500."""
    from .conftest import make_cluster
    from .fakes import FirstFitSession

    c = await make_cluster(aiohttp_client, tmp_path, FirstFitSession, max_body_bytes=1000)
    member = await c.workspace("vision")
    spec = {"name": "a", "command": ["x" * 2000]}
    status, data = await c.call("POST", "/api/v1/runs", member, spec)
    assert status == 413
    assert data["error"] == "request body is larger than 1000 bytes"
    c.store.close()


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("GET", "/api/v1/nothing", 404), ("DELETE", "/api/v1/runs", 405)],
    ids=["unknown-path", "wrong-method"],
)
async def test_unknown_routes_answer_json(
    fake_cluster: Cluster, method: str, path: str, status: int
) -> None:
    """Unknown paths and methods answer a JSON error too."""
    got, data = await fake_cluster.call(method, path)
    assert got == status
    assert set(data) == {"error", "fields"}


async def test_list_filter_must_be_a_state(fake_cluster: Cluster) -> None:
    """`?state=` must be a run state."""
    c = fake_cluster
    member = await c.workspace("vision")
    status, data = await c.call("GET", "/api/v1/runs?state=Sleeping", member)
    assert status == 400
    assert data["fields"] == [
        {
            "field": "state",
            "problem": "'Sleeping' is not allowed; use one of Pending, Running, Succeeded, "
            "Failed, Cancelled",
        }
    ]
