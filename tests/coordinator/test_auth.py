"""Bearer tokens, roles, and isolation between workspaces."""

from __future__ import annotations

import asyncio
import json

import pytest

from .conftest import Cluster


async def test_healthz_needs_no_token(fake_cluster: Cluster) -> None:
    """`/healthz` answers without a token."""
    response = await fake_cluster.client.get("/healthz")
    assert response.status == 200
    assert await response.json() == {"status": "ok"}


@pytest.mark.parametrize(
    "header",
    [None, "Bearer astr_not-a-token", "Basic abc", "Bearer "],
    ids=["missing", "unknown", "wrong-scheme", "empty"],
)
async def test_every_other_route_needs_a_known_token(
    fake_cluster: Cluster, header: str | None
) -> None:
    """Without a known bearer token the API answers 401 with a JSON error."""
    headers = {"Authorization": header} if header else {}
    response = await fake_cluster.client.get("/api/v1/runs", headers=headers)
    assert response.status == 401
    body = await response.json()
    assert body["error"] == "missing or unknown bearer token: send Authorization: Bearer <token>"


async def test_tokens_are_stored_hashed(fake_cluster: Cluster) -> None:
    """The database never holds a token's secret, only its SHA-256."""
    token = await fake_cluster.workspace("vision")
    rows = fake_cluster.store.database.read("SELECT hash FROM tokens")
    assert all(token not in row["hash"] and len(row["hash"]) == 64 for row in rows)


async def test_admin_creates_member_and_agent_tokens(fake_cluster: Cluster) -> None:
    """An admin makes a member token for a workspace and an agent token per machine."""
    c = fake_cluster
    await c.call("PUT", "/api/v1/workspaces/vision", body={"pools": ["h100"]})
    status, member = await c.call(
        "POST", "/api/v1/tokens", body={"role": "member", "workspace": "vision"}
    )
    assert status == 201
    assert member["info"]["role"] == "member"
    status, _agent = await c.call(
        "POST", "/api/v1/tokens", body={"role": "agent", "machine": "gpu-01"}
    )
    assert status == 201
    status, _ = await c.call("GET", "/api/v1/runs", member["token"])
    assert status == 200
    status, machines = await c.call("GET", "/api/v1/machines")
    assert [m["name"] for m in machines["machines"]] == ["gpu-01"]
    assert machines["machines"][0]["state"] == "Down"
    status, _ = await c.call("DELETE", f"/api/v1/tokens/{member['info']['id']}")
    assert status == 204
    status, _ = await c.call("GET", "/api/v1/runs", member["token"])
    assert status == 401


@pytest.mark.parametrize(
    "body",
    [{"role": "member"}, {"role": "member", "workspace": "nope"}, {"role": "agent"}],
    ids=["member-without-workspace", "member-unknown-workspace", "agent-without-machine"],
)
async def test_token_needs_its_owner(fake_cluster: Cluster, body: dict[str, str]) -> None:
    """A member token needs an existing workspace; an agent token needs its machine."""
    status, data = await fake_cluster.call("POST", "/api/v1/tokens", body=body)
    assert status == 400
    assert data["fields"][0]["field"] in ("workspace", "machine")


async def test_agent_may_report_only_for_its_machine(fake_cluster: Cluster) -> None:
    """An agent token reporting for another machine gets 403."""
    c = fake_cluster
    token = c.agent_token("gpu-01")
    body = {
        "report": {"schema_version": "1.0", "name": "gpu-02", "cpu_cores": 1, "memory_bytes": 1}
    }
    status, data = await c.call("PUT", "/api/v1/machines/gpu-02/report", token, body)
    assert status == 403
    assert data["error"] == (
        "this token may not report for machine 'gpu-02': use that machine's agent token"
    )
    status, _ = await c.call("GET", "/api/v1/runs", token)
    assert status == 403


async def test_report_body_must_name_the_machine_of_the_url(fake_cluster: Cluster) -> None:
    """A report whose name differs from the URL's is refused, naming `report.name`."""
    c = fake_cluster
    token = c.agent_token("gpu-01")
    body = {
        "report": {"schema_version": "1.0", "name": "gpu-02", "cpu_cores": 1, "memory_bytes": 1}
    }
    status, data = await c.call("PUT", "/api/v1/machines/gpu-01/report", token, body)
    assert status == 400
    assert data["fields"] == [
        {"field": "report.name", "problem": "is 'gpu-02' but the URL names 'gpu-01'"}
    ]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/metrics", None),
        ("GET", "/api/v1/workspaces", None),
        ("PUT", "/api/v1/workspaces/other", {}),
        ("GET", "/api/v1/tokens", None),
        ("POST", "/api/v1/tokens", {"role": "admin"}),
        ("POST", "/api/v1/machines/gpu-01/cordon", {"reason": "x"}),
        ("PUT", "/api/v1/machines/gpu-01/labels", {"labels": {}}),
    ],
    ids=["metrics", "workspaces", "put-workspace", "tokens", "new-token", "cordon", "labels"],
)
async def test_admin_routes_refuse_members(
    fake_cluster: Cluster, method: str, path: str, body: object
) -> None:
    """Admin routes answer a member 403 `this needs an admin token`."""
    c = fake_cluster
    member = await c.workspace("vision")
    await c.report("gpu-01")
    status, data = await c.call(method, path, member, body)
    assert status == 403
    assert data["error"] == "this needs an admin token"


async def test_workspaces_are_isolated(fake_cluster: Cluster) -> None:
    """A member sees only its workspace's runs and its pools' machines; others' answer 404."""
    c = fake_cluster
    vision = await c.workspace("vision", pools=["h100"])
    audio = await c.workspace("audio", pools=["a100"])
    await c.report("gpu-01")
    await c.report("gpu-02")
    await c.label("gpu-01", pool="h100")
    await c.label("gpu-02", pool="a100")
    await c.submit("vision", "finetune")
    status, runs = await c.call("GET", "/api/v1/runs", audio)
    assert (status, runs["runs"]) == (200, [])
    for path in (
        "/api/v1/runs/finetune",
        "/api/v1/tasks/finetune-0",
        "/api/v1/tasks/finetune-0/logs",
        "/api/v1/machines/gpu-01",
        "/api/v1/machines/gpu-01/reservations",
    ):
        status, data = await c.call("GET", path, audio)
        assert status == 404, path
        assert data["error"].startswith("no ")
    status, _ = await c.call("POST", "/api/v1/runs/finetune/cancel", audio)
    assert status == 404
    status, _ = await c.call("GET", "/api/v1/runs?workspace=vision", audio)
    assert status == 404
    status, machines = await c.call("GET", "/api/v1/machines", audio)
    assert [m["name"] for m in machines["machines"]] == ["gpu-02"]
    status, run = await c.call("GET", "/api/v1/runs/finetune", vision)
    assert (status, run["workspace"]) == (200, "vision")
    # The same name is free in another workspace.
    await c.submit("audio", "finetune")


async def test_admin_names_the_workspace(fake_cluster: Cluster) -> None:
    """An admin acting on runs must name an existing workspace."""
    c = fake_cluster
    await c.workspace("vision")
    status, data = await c.call("GET", "/api/v1/runs")
    assert status == 400
    assert data["fields"] == [{"field": "workspace", "problem": "is required for an admin"}]
    status, _ = await c.call("GET", "/api/v1/runs?workspace=nope")
    assert status == 404
    status, _ = await c.call("GET", "/api/v1/runs?workspace=vision")
    assert status == 200


async def test_an_undecodable_token_is_no_token(fake_cluster: Cluster) -> None:
    """Bytes that are not ASCII in the Authorization header (sent raw, as an attacker would):
    the same JSON 401 as any unknown token, never a 500 with a traceback."""
    server = fake_cluster.client.server
    reader, writer = await asyncio.open_connection(server.host, server.port)
    writer.write(
        b"GET /api/v1/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \xff\xfe\r\n"
        b"Connection: close\r\n\r\n"
    )
    answer = await reader.read()
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 401 "), head
    assert b"application/json" in head
    assert json.loads(body)["error"].startswith("missing or unknown bearer token")


async def test_token_ids_are_never_used_again(fake_cluster: Cluster) -> None:
    """A revoked token's id is never given to a newer one, even the highest id: a revoke read
    from an old listing cannot reach a token made since."""
    c = fake_cluster
    body = {"role": "agent", "machine": "gpu-01"}
    _, first = await c.call("POST", "/api/v1/tokens", body=body)
    status, _ = await c.call("DELETE", f"/api/v1/tokens/{first['info']['id']}")
    assert status == 204
    _, second = await c.call("POST", "/api/v1/tokens", body=body)
    assert second["info"]["id"] > first["info"]["id"]
    status, _ = await c.call("DELETE", f"/api/v1/tokens/{first['info']['id']}")
    assert status == 404
