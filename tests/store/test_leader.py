"""The leader's lease and its fence, on a real PostgreSQL server (`store/leader.py`): who may
take the lease and when, a write of a deposed leader refused, a takeover at once when the
leader's lease session ends, and a `take` that never hangs behind an open write."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import pg_server
import psycopg
import pytest
from helpers import Proxy, until

from astraeus.coordinator.store import Deposed, StorageError, Store
from astraeus.coordinator.store.dialect import WRITE_LOCK
from astraeus.coordinator.store.leader import Leader, Leadership
from astraeus.coordinator.store.migrations import MIGRATIONS

NOW = datetime(2026, 1, 1, tzinfo=UTC)

SHORT = 1.0
"""A lease that runs out within a test's patience."""


@pytest.fixture
def made(postgresql_url: str) -> Iterator[list[Leadership]]:
    """Leadership objects a test makes; their sessions are closed at the end."""
    found: list[Leadership] = []
    yield found
    for each in found:
        each.close()


def _leadership(made: list[Leadership], url: str, name: str, lease: float) -> Leadership:
    each = Leadership(url, advertise=f"http://{name}:8470", lease_seconds=lease, holder=name)
    made.append(each)
    return each


def _name(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def _row(url: str) -> dict[str, Any]:
    with psycopg.connect(url) as conn:
        found = conn.execute(
            "SELECT epoch, holder, url, session_lock FROM leadership WHERE id = 1"
        ).fetchone()
    assert found is not None
    return dict(zip(("epoch", "holder", "url", "session_lock"), found, strict=True))


def test_the_first_takes_the_lease_others_see_it_until_it_runs_out(
    postgresql_url: str, made: list[Leadership]
) -> None:
    """On an empty database the first coordinator makes the table and leads at epoch 1; a
    second reads who leads; once the first's lease ran out unrenewed the second leads at
    epoch 2, and the first's renewal finds itself deposed."""
    a = _leadership(made, postgresql_url, "a", SHORT)
    b = _leadership(made, postgresql_url, "b", SHORT)
    assert b.current() is None
    assert a.take() == 1
    assert _row(postgresql_url) == {
        "epoch": 1, "holder": "a", "url": "http://a:8470", "session_lock": 1,
    }  # fmt: skip
    seen = b.take()
    assert isinstance(seen, Leader)
    assert (seen.epoch, seen.holder, seen.url, seen.session_lock) == (1, "a", "http://a:8470", True)
    assert a.renew() is True

    # `a` stops renewing but its session lives (a paused process): only expiry frees it.
    assert until("b to take the expired lease", lambda: b.take() == 2)
    assert _row(postgresql_url)["holder"] == "b"
    assert _row(postgresql_url)["session_lock"] == 0  # a's session still holds the lock
    assert a.renew() is False
    assert a.deposed_line() == "deposed: b leads at epoch 2; stepping down"


def test_a_standby_takes_over_at_once_when_the_leaders_session_ends(
    postgresql_url: str, made: list[Leadership]
) -> None:
    """The leader's lease session ends (kill -9, its host gone): a standby takes over at the
    next try, long before the lease (a minute here) would run out."""
    a = _leadership(made, postgresql_url, "a", 60.0)
    b = _leadership(made, postgresql_url, "b", 60.0)
    assert a.take() == 1
    seen = b.take()
    assert isinstance(seen, Leader)
    assert seen.expires_in > 30
    a.close()  # the server frees the session's advisory lock
    assert until("b to take over", lambda: b.take() == 2)
    row = _row(postgresql_url)
    assert (row["holder"], row["session_lock"]) == ("b", 1)


def test_a_standby_leaves_the_lock_to_a_leader_that_has_not_taken_it_yet(
    postgresql_url: str, made: list[Leadership]
) -> None:
    """A leader that took over by expiry cannot hold the coordinator lock while the old
    leader's session lives; a standby that then finds the lock free must not read that as
    the new leader's death: only a leader that says it holds the lock is judged by it."""
    a = _leadership(made, postgresql_url, "a", SHORT)
    b = _leadership(made, postgresql_url, "b", 60.0)
    c = _leadership(made, postgresql_url, "c", 60.0)
    assert a.take() == 1
    assert until("b to take the expired lease", lambda: b.take() == 2)
    assert _row(postgresql_url)["session_lock"] == 0
    a.close()  # the old leader's session ends: the lock is free, b has not taken it yet
    seen = c.take()
    assert isinstance(seen, Leader)
    assert (seen.holder, seen.epoch) == ("b", 2)
    assert b.renew() is True  # b takes the lock now that c left it
    assert _row(postgresql_url)["session_lock"] == 1


def test_the_fence_refuses_a_deposed_leaders_write(
    postgresql_url: str, made: list[Leadership]
) -> None:
    """A leader's store writes while it leads; once another took the lease, its next write
    rolls back whole and raises `Deposed` (not a storage fault), and every later one too,
    without reaching the database."""
    a = _leadership(made, postgresql_url, "a", SHORT)
    b = _leadership(made, postgresql_url, "b", SHORT)
    epoch = a.take()
    assert epoch == 1
    store = Store.open(postgresql_url, epoch=epoch, lease_seconds=SHORT)
    told: list[Deposed] = []
    store.database.on_deposed.append(told.append)
    try:
        assert store.database.schema_version == len(MIGRATIONS)
        store.machines.ensure("before", NOW)
        assert until("b to take the expired lease", lambda: b.take() == 2)
        with pytest.raises(Deposed) as refused:
            store.machines.ensure("after", NOW)
        assert (refused.value.mine, refused.value.found) == (1, 2)
        assert [(e.mine, e.found) for e in told] == [(1, 2)]
        assert store.database.fault is None
        assert store.database.write_failures == {}
        with pytest.raises(Deposed):
            store.machines.ensure("later", NOW)
        assert len(told) == 1
    finally:
        store.close()
    with psycopg.connect(postgresql_url) as conn:
        names = [name for (name,) in conn.execute("SELECT name FROM machines ORDER BY name")]
    assert names == ["before"]


def test_take_does_not_hang_behind_an_open_write(
    postgresql_url: str, made: list[Leadership]
) -> None:
    """A paused leader's write transaction holds the writers' lock: a standby's `take` gives
    up after its lock timeout (and tries again later) instead of waiting for it; once the
    transaction ends the standby takes the lease."""
    a = _leadership(made, postgresql_url, "a", SHORT)
    b = _leadership(made, postgresql_url, "b", SHORT)
    assert a.take() == 1
    with psycopg.connect(postgresql_url, autocommit=True) as blocker:
        blocker.execute(f"BEGIN; SELECT pg_advisory_xact_lock({WRITE_LOCK})".encode())
        until("a's lease to run out", lambda: (row := b.current()) and row.expires_in < 0)
        answers: list[object] = []
        trying = threading.Thread(target=lambda: answers.append(b.take()), daemon=True)
        trying.start()
        trying.join(30)  # a hang is what this test is for; the lock timeout is 1 s
        assert not trying.is_alive(), "take() hung behind an open write transaction"
        assert isinstance(answers[0], Leader)
        assert answers[0].epoch == 1
        blocker.execute("ROLLBACK")
    assert until("b to take the lease", lambda: b.take() == 2)


def test_a_leaders_sessions_cut_a_transaction_left_idle(
    postgresql_url: str, made: list[Leadership]
) -> None:
    """The store of a leader asks the server to end any transaction of its sessions idle for
    about a lease (a paused process's), so its locks never outlive the lease for long."""
    a = _leadership(made, postgresql_url, "a", 2.0)
    epoch = a.take()
    assert isinstance(epoch, int)
    store = Store.open(postgresql_url, epoch=epoch, lease_seconds=2.0)
    try:
        with store.database.write() as conn:
            shown = conn.execute("SHOW idle_in_transaction_session_timeout").fetchone()
        assert shown[0] == "2s"
    finally:
        store.close()
    unfenced = Store.open(postgresql_url)
    try:
        with unfenced.database.write() as conn:
            assert conn.execute("SHOW idle_in_transaction_session_timeout").fetchone()[0] == "0"
    finally:
        unfenced.close()


def test_the_renewing_thread_keeps_the_lease_and_reports_a_takeover(
    postgresql_url: str, made: list[Leadership]
) -> None:
    """Renewed every third of the lease, the leader keeps it past many leases; once another
    took over (its lease ended by hand, as a paused leader's runs out), the thread reports the
    `deposed` line naming the new leader, once."""
    a = _leadership(made, postgresql_url, "a", SHORT)
    b = _leadership(made, postgresql_url, "b", SHORT)
    assert a.take() == 1
    lines: list[str] = []
    a.start_renewing(lines.append)
    seen: set[float] = set()
    until("four renewals (over a lease)", lambda: seen.add(a.renewed_at) or len(seen) > 4)
    assert lines == []
    assert isinstance(b.take(), Leader)  # a's lease is alive: no takeover

    with psycopg.connect(postgresql_url, autocommit=True) as conn:
        conn.execute("UPDATE leadership SET epoch = epoch + 1, holder = 'c' WHERE id = 1")
    until("a to be told", lambda: lines)
    assert lines == ["deposed: c leads at epoch 2; stepping down"]


def test_a_leader_cut_off_from_the_database_steps_down_when_its_lease_runs_out(
    postgresql_server: pg_server.Server, postgresql_url: str, made: list[Leadership]
) -> None:
    """The lease connection fails (the way to the server cut): the leader keeps trying to
    renew and, once its lease would have run out by its own clock, reports it lost, without
    waiting for a server it cannot reach."""
    proxy = Proxy(postgresql_server.port)
    try:
        through = f"postgresql://{pg_server.USER}@127.0.0.1:{proxy.port}/{_name(postgresql_url)}"
        a = _leadership(made, through, "a", SHORT)
        assert a.take() == 1
        lines: list[str] = []
        a.start_renewing(lines.append)
        proxy.cut()
        until("a to give up", lambda: lines)
        assert len(lines) == 1
        assert lines[0].startswith("lease lost: not renewed for 1 s (")
        assert lines[0].endswith("); stepping down")
        assert a.lease_left() < 0
    finally:
        proxy.cut()


def test_a_leader_that_stops_cleanly_hands_over_at_once(
    postgresql_url: str, made: list[Leadership]
) -> None:
    """On SIGTERM the leader ends its lease (`resign`): with a minute still on it, and its
    session still open, a standby takes over at its next try."""
    a = _leadership(made, postgresql_url, "a", 60.0)
    b = _leadership(made, postgresql_url, "b", 60.0)
    assert a.take() == 1
    lines: list[str] = []
    a.start_renewing(lines.append)
    assert isinstance(b.take(), Leader)
    a.resign()  # stops the renewing thread first: it reports nothing
    assert b.take() == 2
    assert a.renew() is False
    assert lines == []


def test_a_leader_paused_inside_a_write_commits_nothing(
    postgresql_url: str, made: list[Leadership]
) -> None:
    """A leader paused in the middle of a write transaction (it holds the writers' lock): the
    server ends that transaction once it has been idle about a lease, a standby then takes the
    lease, and when the paused leader goes on, its commit fails: nothing of it is written, and
    its next write meets the fence."""
    a = _leadership(made, postgresql_url, "a", SHORT)
    b = _leadership(made, postgresql_url, "b", SHORT)
    epoch = a.take()
    assert epoch == 1
    store = Store.open(postgresql_url, epoch=epoch, lease_seconds=SHORT)
    try:

        def paused_write() -> None:
            with store.database.write() as conn:
                conn.execute(
                    "INSERT INTO machines (name, created_at) VALUES (?, ?)",
                    ("paused", NOW.isoformat()),
                )
                until("b to take over behind the open write", lambda: b.take() == 2)

        with pytest.raises(StorageError):  # the server ended the session: the commit fails
            paused_write()
        with pytest.raises(Deposed):
            store.machines.ensure("after", NOW)
    finally:
        store.close()
    assert _query_names(postgresql_url) == []


def _query_names(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [name for (name,) in conn.execute("SELECT name FROM machines ORDER BY name")]
