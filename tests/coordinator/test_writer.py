"""The writer thread: the service's writes run there, one at a time and in order, off the event
loop; faults and shutdown keep every write whole. Real SQLite files, and the same tests on a
real PostgreSQL database (`database_location`)."""

from __future__ import annotations

import asyncio
import functools
import gc
import stat
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import until_async

from astraeus.coordinator.api.keys import REPORTING
from astraeus.coordinator.store import StorageError
from astraeus.coordinator.store.db import Database
from astraeus.coordinator.store.dialect import postgresql_ddl

from .conftest import Cluster
from .fakes import report


@pytest.fixture
def database(database_location: Path | str) -> Iterator[Database]:
    """A database with one table, its writer thread started: on each engine."""
    db = Database(database_location)
    table = "CREATE TABLE items (id INTEGER PRIMARY KEY, who TEXT, n INTEGER)"
    with db.write() as conn:
        conn.execute(postgresql_ddl(table) if db.postgresql else table)
    db.start_writer()
    yield db
    db.close()


@pytest.fixture
def sqlite_database(tmp_path: Path) -> Iterator[Database]:
    """The same on SQLite only: for a full disk made with SQLite's own page limit."""
    db = Database(tmp_path / "astraeus.db")
    with db.write() as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, who TEXT, n INTEGER)")
    db.start_writer()
    yield db
    db.close()


def _insert(db: Database, who: str, n: int, seen: list[tuple[str, str]] | None = None) -> int:
    with db.write() as conn:
        conn.execute("INSERT INTO items (who, n) VALUES (?, ?)", (who, n))
    if seen is not None:
        seen.append((who, threading.current_thread().name))
    return n


def _rows(db: Database) -> list[tuple[str, int]]:
    return [(r["who"], r["n"]) for r in db.read("SELECT who, n FROM items ORDER BY id")]


async def test_concurrent_writers_all_land_on_the_writer_thread(database: Database) -> None:
    """Two hundred jobs sent at once from the event loop all commit, each whole, all of them
    on the writer thread, and none on the event loop's."""
    seen: list[tuple[str, str]] = []
    results = await asyncio.gather(
        *(database.run(_insert, database, f"job-{i}", i, seen) for i in range(200))
    )
    assert results == list(range(200))
    assert sorted(n for _, n in _rows(database)) == list(range(200))
    assert {thread for _, thread in seen} == {database.writer.name}
    assert database.writer.name.startswith(("sqlite-writer ", "postgresql-writer "))
    assert database.writes_elsewhere == {}


async def test_jobs_for_one_machine_run_in_the_order_sent(database: Database) -> None:
    """Updates sent one after another (as a machine's reports are) are stored in that order,
    even while other jobs are queued between them."""
    jobs = []
    for n in range(50):
        jobs.append(database.run(_insert, database, "gpu-01", n))
        jobs.append(database.run(_insert, database, f"other-{n}", n))
    await asyncio.gather(*jobs)
    assert [n for who, n in _rows(database) if who == "gpu-01"] == list(range(50))


async def test_a_fault_in_a_queued_write_fails_only_that_write(sqlite_database: Database) -> None:
    """A job that meets a full disk raises `StorageError` to its sender and writes nothing of
    itself; the jobs queued before and after it still run, and the fault is recorded until a
    write succeeds again."""
    database = sqlite_database

    def fill() -> None:
        pages = database._writer.execute("PRAGMA page_count").fetchone()[0]
        database._writer.execute(f"PRAGMA max_page_count = {pages}")

    def big(who: str) -> None:
        with database.write() as conn:
            conn.execute("INSERT INTO items (who, n) VALUES (?, 1)", (who,))
            conn.execute("INSERT INTO items (who, n) VALUES (?, ?)", (who, len("x" * 400_000)))
            conn.execute("UPDATE items SET who = ? WHERE who = ?", ("x" * 400_000, who))

    def room() -> None:
        database._writer.execute("PRAGMA max_page_count = 1073741823")

    outcomes = await asyncio.gather(
        database.run(_insert, database, "before", 1),
        database.run(fill),
        database.run(big, "doomed"),
        database.run(room),
        database.run(_insert, database, "after", 2),
        return_exceptions=True,
    )
    assert outcomes[0] == 1
    assert outcomes[4] == 2
    assert isinstance(outcomes[2], StorageError)
    assert str(outcomes[2]) == "database is not writable: disk full"
    assert _rows(database) == [("before", 1), ("after", 2)]
    assert database.fault is None  # the write after it succeeded: the fault is over
    assert database.write_failures == {"disk full": 1}


async def test_stopping_drains_the_queue(database: Database) -> None:
    """Stopping the writer runs every job already queued before the thread ends; a write sent
    afterwards runs on the sender's thread."""
    gate = threading.Event()

    def blocked() -> None:
        gate.wait(5)
        _insert(database, "first", 0)

    futures = [database.writer.submit(blocked)]
    futures += [
        database.writer.submit(lambda n=n: _insert(database, "queued", n)) for n in range(1, 30)
    ]
    gate.set()
    database.stop_writer()
    assert all(f.done() and f.exception() is None for f in futures)
    assert [n for _, n in _rows(database)] == list(range(30))
    seen: list[tuple[str, str]] = []
    await database.run(_insert, database, "later", 30, seen)
    assert seen == [("later", threading.current_thread().name)]


def test_files_stay_private_with_the_writer_thread(tmp_path: Path) -> None:
    """The database, its WAL and its shared memory are 0600 when the writer thread and
    readers on other threads have opened them."""
    db = Database(tmp_path / "astraeus.db")
    db.start_writer()
    db.writer.submit(lambda: db.probe()).result(5)
    reader = threading.Thread(target=lambda: db.read("SELECT 1"))
    reader.start()
    reader.join()
    modes = {
        p.name: stat.S_IMODE(p.stat().st_mode)
        for p in tmp_path.iterdir()
        if p.name.startswith("astraeus.db")
    }
    db.close()
    assert modes == {"astraeus.db": 0o600, "astraeus.db-wal": 0o600, "astraeus.db-shm": 0o600}


def _hold_writer(c: Cluster) -> threading.Event:
    """Keep the writer thread busy inside a write transaction until the event is set."""
    gate = threading.Event()

    def busy() -> None:
        with c.store.database.write():
            gate.wait(10)

    c.store.database.writer.submit(busy)
    return gate


async def test_requests_are_answered_while_the_writer_is_busy(store_cluster: Cluster) -> None:
    """While the writer thread sits inside a transaction, heartbeats, reads and /healthz are
    answered (none waits on a commit), and a submission waits for its turn and then lands."""
    c = store_cluster
    await c.workspace("vision")
    await c.report("gpu-01")
    gate = _hold_writer(c)
    try:
        submitted = asyncio.ensure_future(c.submit("vision", "queued-behind"))
        await c.report("gpu-01")  # a plain heartbeat
        status, runs = await c.call("GET", "/api/v1/runs", c.tokens["vision"])
        assert (status, runs) == (200, {"runs": []})
        status, health = await c.call("GET", "/healthz")
        assert (status, health) == (200, {"status": "ok"})
        assert not submitted.done()
    finally:
        gate.set()
    assert (await submitted)["name"] == "queued-behind"


async def test_a_second_report_while_one_waits_for_the_writer_is_429(fake_cluster: Cluster) -> None:
    """A report waiting its turn on the writer thread is still in flight: a second one for the
    same machine is refused with 429 and Retry-After, and the first is stored once."""
    c = fake_cluster
    await c.workspace("vision")
    await c.report("gpu-01")
    gate = _hold_writer(c)
    try:
        first = asyncio.ensure_future(c.report("gpu-01", gpus=4))  # a changed report: a write
        await until_async(
            "the first report to be in flight", lambda: "gpu-01" in c.client.app[REPORTING]
        )
        body = {"report": report("gpu-01")}
        second = await c.client.put(
            "/api/v1/machines/gpu-01/report", json=body, headers=c.auth(c.agent_token("gpu-01"))
        )
        assert (second.status, second.headers["Retry-After"]) == (429, "5")
        assert not first.done()
    finally:
        gate.set()
    await first
    record = c.records.get("gpu-01")
    assert record is not None
    assert record.report is not None
    assert len(record.report.gpus) == 4


async def test_the_service_writes_only_on_the_writer_thread(store_cluster: Cluster) -> None:
    """Submitting, placing, reporting updates, cancelling, cordoning, labelling, reserving and
    making tokens over HTTP write nothing on the event loop's thread."""
    c = store_cluster
    await c.workspace("vision")
    await c.report("gpu-01")
    c.store.database.writes_elsewhere.clear()  # the test's own setup wrote directly
    await c.submit("vision", "train", gpus=1)
    await c.run_pass()
    await c.report("gpu-01", [{"task": "train-0", "state": "Running"}], tasks=["train-0"])
    status, _ = await c.call("POST", "/api/v1/runs/train/cancel?workspace=vision")
    assert status == 200
    for method, path, body in (
        ("POST", "/api/v1/machines/gpu-01/cordon", {"reason": "fan"}),
        ("POST", "/api/v1/machines/gpu-01/uncordon", None),
        ("PUT", "/api/v1/machines/gpu-01/labels", {"labels": {"rack": "r1"}}),
        ("POST", "/api/v1/tokens", {"role": "agent", "machine": "gpu-09"}),
        ("PUT", "/api/v1/workspaces/audio", {}),
    ):
        status, data = await c.call(method, path, body=body)
        assert status in (200, 201), (path, data)
    body = {
        "workspace": "vision",
        "starts_at": "2026-10-01T10:00:00+00:00",
        "ends_at": "2026-10-01T12:00:00+00:00",
    }
    status, stored = await c.call("POST", "/api/v1/machines/gpu-01/reservations", body=body)
    assert status == 201, stored
    path = f"/api/v1/machines/gpu-01/reservations/{stored['id']}"
    assert (await c.call("DELETE", path))[0] == 204
    await c.run_pass()
    assert c.store.database.writes_elsewhere == {}
    row = c.store.database.read_one("SELECT state FROM runs WHERE name = 'train'")
    assert row is not None
    assert row["state"] == "Cancelled"


async def test_jobs_in_turn_let_other_writes_in_between(database: Database) -> None:
    """A pass's chunks run one after another on the writer thread; a write sent while the
    first runs is done before the second, and a chunk that raises stops the ones after it."""
    gate = threading.Event()
    order: list[str] = []

    first_running = threading.Event()

    def chunk(n: int) -> int:
        if n == 0:
            first_running.set()
            gate.wait(5)
        if n == 2:
            raise ValueError("chunk 2 is bad")
        order.append(f"chunk {n}")
        return n

    chain = asyncio.ensure_future(
        database.run_in_turn([lambda n=n: chunk(n) for n in range(4)])  # type: ignore[misc]
    )
    await until_async("chunk 0 to run", first_running.is_set)
    between = database.run(lambda: order.append("report"))
    gate.set()
    await between
    with pytest.raises(ValueError, match="chunk 2 is bad"):
        await chain
    assert order == ["chunk 0", "report", "chunk 1"]


class _Rows:
    """Stands for a pass's rows: what a chunk of the commit holds."""


async def test_jobs_in_turn_hold_nothing_once_done(database: Database) -> None:
    """Once `run_in_turn` has returned, nothing of it keeps its jobs (and what they hold)
    alive: no reference cycle waits for the collector, which the gc policy would freeze after
    the pass with all it held (issue 25.6)."""
    rows = _Rows()
    gone = weakref.ref(rows)
    jobs = [functools.partial(_insert, database, "chunk", n) for n in range(3)]
    held = [functools.partial(lambda _rows: 0, rows)]
    gc.disable()  # no collection may free a cycle behind the test's back
    try:
        assert await database.run_in_turn([*jobs, *held]) == [0, 1, 2, 0]
        del jobs, held, rows
        assert gone() is None
    finally:
        gc.enable()
    assert _rows(database) == [("chunk", 0), ("chunk", 1), ("chunk", 2)]
