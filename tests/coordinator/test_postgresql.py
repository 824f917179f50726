"""Storage faults on PostgreSQL, with a real server: read-only (`default_transaction_read_only`)
and out of reach (connection refused, through a proxy the test cuts). Each answers writes 503
with `Retry-After`, `/healthz` 503, stores nothing half-written, and recovers without a
restart once the server is back; and a leader's store on PostgreSQL is fenced by its epoch."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pg_server
import pytest
from helpers import Proxy

from astraeus.coordinator.settings import Settings
from astraeus.coordinator.startup import start
from astraeus.coordinator.store import Store
from astraeus.coordinator.store.leader import Leadership

from .conftest import ClientFactory, Cluster, make_cluster
from .fakes import FirstFitSession


def _name(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def _through(proxy: Proxy, database: str) -> str:
    """`database` on the test server, reached through `proxy`."""
    return f"postgresql://{pg_server.USER}@127.0.0.1:{proxy.port}/{database}"


@pytest.fixture
def proxy(postgresql_server: pg_server.Server) -> Iterator[Proxy]:
    made = Proxy(postgresql_server.port)
    yield made
    made.cut()


@pytest.fixture
async def through_proxy(
    aiohttp_client: ClientFactory, tmp_path: Path, postgresql_url: str, proxy: Proxy
) -> AsyncIterator[Cluster]:
    """A coordinator whose database is reached through `proxy`."""
    made = await make_cluster(
        aiohttp_client, tmp_path, FirstFitSession, database=_through(proxy, _name(postgresql_url))
    )
    yield made
    if not proxy.listening:
        proxy.heal()  # closing writes the heartbeats kept in memory
    made.store.close()


async def _submit(c: Cluster, name: str) -> tuple[int, object, str | None]:
    response = await c.client.post(
        "/api/v1/runs",
        json={"name": name, "command": ["x"]},
        headers=c.auth(c.tokens["vision"]),
    )
    return response.status, await response.json(), response.headers.get("Retry-After")


def _runs(url: str) -> list[str]:
    store = Store.open(url)
    try:
        return [row["name"] for row in store.database.read("SELECT name FROM runs ORDER BY seq")]
    finally:
        store.close()


async def test_a_read_only_server_answers_writes_503_and_recovers(
    aiohttp_client: ClientFactory,
    tmp_path: Path,
    postgresql_server: pg_server.Server,
    postgresql_url: str,
) -> None:
    """Once the database turns read-only (its sessions reconnect read-only, as after a
    failover to a standby), a submission answers 503 with `Retry-After` and the fault's words,
    reads still work, `/healthz` is 503 and the gauge 0; turned writable again, the next
    write succeeds with no restart and nothing of the refused one is stored."""
    c = await make_cluster(aiohttp_client, tmp_path, FirstFitSession, database=postgresql_url)
    try:
        await c.workspace("vision")
        assert (await _submit(c, "before"))[0] == 201
        name = _name(postgresql_url)
        postgresql_server.admin(f"ALTER DATABASE {name} SET default_transaction_read_only = on")
        ended = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "
        postgresql_server.admin(f"{ended}'{name}' AND pid <> pg_backend_pid()")
        status, body, retry = await _submit(c, "refused")
        assert (status, body, retry) == (
            503,
            {"error": "database is not writable: the database is read-only", "fields": []},
            "5",
        )
        status, runs = await c.call("GET", "/api/v1/runs", c.tokens["vision"])
        assert (status, [r["name"] for r in runs["runs"]]) == (200, ["before"])
        status, health = await c.call("GET", "/healthz")
        assert (status, health["error"]) == (
            503,
            "database is not writable: the database is read-only",
        )
        _, metrics = await c.call("GET", "/metrics")
        assert "\nastraeus_database_writable 0\n" in metrics

        postgresql_server.admin(f"ALTER DATABASE {name} SET default_transaction_read_only = off")
        c.store.database._probed = 0.0  # the next check may probe at once
        status, health = await c.call("GET", "/healthz")
        assert (status, health) == (200, {"status": "ok"})
        assert (await _submit(c, "after"))[0] == 201
        assert _runs(postgresql_url) == ["before", "after"]
    finally:
        c.store.close()


async def test_an_unreachable_server_answers_503_and_recovers(
    through_proxy: Cluster, proxy: Proxy, postgresql_url: str
) -> None:
    """With the way to the server cut (connections reset, new ones refused) writes and reads
    answer 503 with `Retry-After`, and `/healthz` 503; once it is back the coordinator's
    sessions reconnect by themselves and the next submission is stored."""
    c = through_proxy
    await c.workspace("vision")
    assert (await _submit(c, "before"))[0] == 201
    proxy.cut()
    status, body, retry = await _submit(c, "refused")
    assert (status, retry) == (503, "5")
    assert body == {
        "error": "database is not writable: cannot reach the database server",
        "fields": [],
    }
    status, health = await c.call("GET", "/healthz")
    assert status == 503
    assert "cannot reach the database server" in health["error"]
    proxy.heal()
    c.store.database._probed = 0.0
    status, health = await c.call("GET", "/healthz")
    assert (status, health) == (200, {"status": "ok"})
    assert (await _submit(c, "after"))[0] == 201
    assert _runs(postgresql_url) == ["before", "after"]


def test_a_leader_starts_fenced_by_its_epoch_without_a_lock(
    tmp_path: Path, postgresql_url: str
) -> None:
    """On PostgreSQL the lease decides who serves (`store/leader.py`): `start` takes no lock
    of its own, and the store it opens for a leader fences every write by the leader's epoch.
    (A second coordinator stands by instead of being refused: tests/faults/test_leader.py.)"""
    settings = Settings(database_url=postgresql_url, state_dir=tmp_path)
    leadership = Leadership(postgresql_url, advertise="http://a:8470", lease_seconds=6.0)
    try:
        assert leadership.take() == 1
        first = start(settings, leadership)
        assert not isinstance(first, str), first
        held, store, _records = first
        try:
            assert held is None
            assert store.database.epoch == 1
            assert store.tokens.count() == 1  # the first admin token, written under the fence
        finally:
            store.close()
    finally:
        leadership.close()
