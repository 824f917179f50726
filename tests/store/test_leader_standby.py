"""A standby's answers (`coordinator/standby.py`), the protocol clients follow to the leader:
`/healthz` 503 naming the leader, the API 503 with `Astraeus-Leader` and `Retry-After: 1`, a
console page 307 to the leader, `/metrics` saying 0; the words when no one leads yet; and the
shipped systemd unit bringing a leader that stepped down back (as a standby)."""

from __future__ import annotations

import configparser
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient
from yarl import URL

from astraeus.coordinator.standby import View, standby_app
from astraeus.coordinator.store.leader import EX_TEMPFAIL, Leader

ROOT = Path(__file__).resolve().parent.parent.parent

Client = TestClient[Any, Any]
ClientFactory = Callable[[web.Application], Awaitable[Client]]

LEADER = Leader(
    epoch=4, holder="coord-a pid 42", url="https://coord-a:8470", expires_in=5.0, session_lock=True
)


async def test_a_standby_names_the_leader(aiohttp_client: ClientFactory) -> None:
    client = await aiohttp_client(standby_app(View(leader=LEADER)))

    health = await client.get("/healthz")
    assert health.status == 503
    assert health.headers["Retry-After"] == "1"
    assert await health.json() == {
        "status": "standby",
        "leader": "https://coord-a:8470",
        "holder": "coord-a pid 42",
        "epoch": 4,
        "database": "reachable",
    }

    for method, path in (("GET", "/api/v1/runs"), ("POST", "/api/v1/runs"), ("GET", "/api")):
        answer = await client.request(method, path, json={"name": "x"})
        assert answer.status == 503, (method, path)
        assert answer.headers["Retry-After"] == "1"
        assert answer.headers["Astraeus-Leader"] == "https://coord-a:8470"
        assert await answer.json() == {
            "error": "this coordinator is a standby; the leader is https://coord-a:8470",
            "fields": [],
            "leader": "https://coord-a:8470",
        }

    page = await client.get("/console/jobs/c/run-1?tab=logs", allow_redirects=False)
    assert page.status == 307
    assert page.headers["Location"] == "https://coord-a:8470/console/jobs/c/run-1?tab=logs"
    # A path that looks like another host stays a path on the leader.
    raw = URL(f"http://{client.host}:{client.port}//evil.example/x", encoded=True)
    sneaky = await client.session.get(raw, allow_redirects=False)
    assert sneaky.status == 307
    assert sneaky.headers["Location"].startswith("https://coord-a:8470/")

    metrics = await client.get("/metrics")
    assert metrics.status == 200
    assert "\nastraeus_coordinator_leader 0\n" in await metrics.text()


async def test_a_standby_before_any_leader(aiohttp_client: ClientFactory) -> None:
    """No lease row yet (or the database out of reach): null leader, no header, no redirect."""
    client = await aiohttp_client(standby_app(View(leader=None, reachable=False)))

    health = await client.get("/healthz")
    assert health.status == 503
    body = await health.json()
    assert (body["status"], body["leader"], body["database"]) == ("standby", None, "unreachable")

    answer = await client.post("/api/v1/runs", json={})
    assert answer.status == 503
    assert "Astraeus-Leader" not in answer.headers
    assert answer.headers["Retry-After"] == "1"
    assert await answer.json() == {
        "error": "this coordinator is a standby; there is no leader yet",
        "fields": [],
        "leader": None,
    }

    page = await client.get("/console/", allow_redirects=False)
    assert page.status == 503
    assert (await page.json())["leader"] is None


def test_the_shipped_unit_restarts_a_leader_that_stepped_down() -> None:
    """A deposed leader exits 75 (`EX_TEMPFAIL`) and must come back as a standby: the unit's
    `Restart=` restarts on that status (`on-failure` or `always`; not `on-abnormal`, which
    ignores exit statuses), and no setting counts 75 as success or forbids the restart."""
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.read(ROOT / "systemd" / "astraeus-coordinator.service")
    service = unit["Service"]
    assert service["restart"] in ("on-failure", "always")
    for key in ("restartpreventexitstatus", "successexitstatus"):
        assert str(EX_TEMPFAIL) not in service.get(key, "").split(), key
