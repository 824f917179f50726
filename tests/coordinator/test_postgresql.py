"""Storage faults on PostgreSQL, with a real server: read-only (`default_transaction_read_only`)
and out of reach (connection refused, through a proxy the test cuts). Each answers writes 503
with `Retry-After`, `/healthz` 503, stores nothing half-written, and recovers without a
restart once the server is back; and a leader's store on PostgreSQL is fenced by its epoch."""

from __future__ import annotations

import pickle
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import pg_server
import pytest
from helpers import Proxy

from astraeus.coordinator.api.errors import RETRY_AFTER
from astraeus.coordinator.api.overload import refused_retry_after
from astraeus.coordinator.settings import Settings
from astraeus.coordinator.startup import start
from astraeus.coordinator.store import StorageError, Store
from astraeus.coordinator.store.dialect import (
    SESSION_DEFAULTS,
    PgStorageError,
    converted,
    pg_connect,
)
from astraeus.coordinator.store.faults import REOPEN, Fault
from astraeus.coordinator.store.leader import Leadership

from .conftest import ClientFactory, Cluster, make_cluster, settings_for
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


async def test_a_report_whose_token_cannot_be_checked_gets_the_reports_retry_after(
    through_proxy: Cluster, proxy: Proxy
) -> None:
    """With the server out of reach the token itself cannot be read: an agent's report is
    refused 503 with the report's `Retry-After` (a fraction of the Down window, so it is
    heard from again before its machine is Down), a person's request with the usual 5 s; the
    failed read is the fault `/healthz` names, and the first write once the server is back
    ends it and tells the scheduler (`recovered`)."""
    c = through_proxy
    await c.workspace("vision")
    agent = c.agent_token("node-1")
    heard_again: list[bool] = []
    c.store.database.recovered.append(lambda: heard_again.append(True))
    proxy.cut()
    response = await c.client.put("/api/v1/machines/node-1/report", json={}, headers=c.auth(agent))
    assert response.status == 503
    assert response.headers["Retry-After"] == refused_retry_after(settings_for(Path()))
    assert refused_retry_after(settings_for(Path())) != str(RETRY_AFTER)
    assert (await _submit(c, "refused"))[2] == str(RETRY_AFTER)
    fault = c.store.database.fault
    assert fault is not None
    assert fault.problem == "cannot reach the database server"
    proxy.heal()
    c.store.database._probed = 0.0
    status, health = await c.call("GET", "/healthz")
    assert (status, health, heard_again) == (200, {"status": "ok"}, [True])


def test_a_fault_recorded_during_a_commit_outlives_it(postgresql_url: str) -> None:
    """A reader may record the server's fault while a write commits (the commit was
    acknowledged just before the server went away): that commit proves nothing about the
    server now, so the fault stays until a write that began after it succeeds."""
    store = Store.open(postgresql_url)
    database = store.database
    try:
        with database.write() as conn:
            conn.execute("DELETE FROM write_probe")
            database.fault = Fault("cannot reach the database server", 14, datetime.now(UTC))
        assert database.fault is not None
        assert database.probe() is None
    finally:
        store.close()


def test_storage_errors_come_back_whole_from_the_pass_worker() -> None:
    """The pass worker's errors reach the service pickled: a storage fault must keep its
    words and code (else the process pool breaks and the worker is restarted for nothing)."""
    for error in (
        StorageError("cannot reach the database server", 14),
        PgStorageError("cannot reach the database server", 14, "connection refused"),
    ):
        again = pickle.loads(pickle.dumps(error))  # noqa: S301 - our own object
        assert (type(again), str(again), again.code) == (type(error), str(error), error.code)


@pytest.mark.parametrize(
    ("error", "problem", "code"),
    [
        ("server closed the connection unexpectedly", "cannot reach the database server", 14),
        ("AdminShutdown", "cannot reach the database server", 14),
        ("ReadOnlySqlTransaction", "the database is read-only", 8),
    ],
)
def test_a_dead_or_read_only_session_is_a_fault_that_reopens(
    error: str, problem: str, code: int
) -> None:
    """What a session says when its primary crashed (the connection closed, no SQLSTATE), was
    shut down (57P01 `terminating connection due to administrator command`), or is a standby
    (25006): a storage fault after which the connection is opened again (`REOPEN`), for the
    write session and each thread's read session alike."""
    import psycopg

    raised = (
        psycopg.OperationalError(error)
        if " " in error
        else getattr(psycopg.errors, error)("terminating connection")
    )
    found = converted(raised)
    assert isinstance(found, PgStorageError)
    assert (found.problem, found.code, found.code in REOPEN) == (problem, code, True)


def test_sessions_give_up_on_a_vanished_host_unless_the_url_says_otherwise(
    postgresql_url: str,
) -> None:
    """Every session gets keepalives and a TCP user timeout (a primary whose host vanished is
    given up in about 30 s, not 15 minutes); a value the URL gives is kept."""
    conn = pg_connect(postgresql_url + "?keepalives_idle=42")
    try:
        used = conn.info.get_parameters()
    finally:
        conn.close()
    assert used["keepalives_idle"] == "42"
    for key in ("connect_timeout", "keepalives_interval", "keepalives_count", "tcp_user_timeout"):
        assert used[key] == SESSION_DEFAULTS[key]
