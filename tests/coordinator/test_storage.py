"""Storage faults inside one coordinator: SQLite's own `max_page_count` stands in for a full
disk (SQLITE_FULL, what a full file system gives too); real file systems, a read-only file and
a real I/O error are in tests/faults/test_storage_faults.py."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from astraeus.coordinator.service import main
from astraeus.coordinator.store import Store
from astraeus.coordinator.store.backup import BackupError, backup
from astraeus.coordinator.store.faults import storage_problem
from astraeus.coordinator.store.migrations import MIGRATIONS

from .conftest import Cluster
from .fakes import START
from .test_concurrency import assert_no_gpu_held_twice

FULL = {"error": "database is not writable: disk full", "fields": []}
BIG = {"BLOB": "x" * 200_000}
"""An environment big enough that storing the run needs new pages."""


def _fill(c: Cluster) -> None:
    """The file may not grow by a page: every write that needs one fails with SQLITE_FULL."""
    writer = c.store.database._writer  # the limit is the write connection's own setting
    pages = writer.execute("PRAGMA page_count").fetchone()[0]
    writer.execute(f"PRAGMA max_page_count = {pages}")


def _make_room(c: Cluster) -> None:
    c.store.database._writer.execute("PRAGMA max_page_count = 1073741823")


def _runs(c: Cluster) -> int:
    return int(c.store.database.read("SELECT count(*) AS n FROM runs")[0]["n"])


async def _submit(c: Cluster, name: str) -> int:
    spec = {"name": name, "command": ["x"], "env": BIG}
    status, _ = await c.call("POST", "/api/v1/runs", c.tokens["vision"], spec)
    return status


async def test_a_full_disk_answers_writes_503_and_keeps_reads(fake_cluster: Cluster) -> None:
    """With no room for a submission it answers 503 with the JSON error and stores nothing;
    reads and plain heartbeats still work, and the metrics count the refused write."""
    c = fake_cluster
    await c.workspace("vision")
    await c.report("gpu-01")
    assert await _submit(c, "before") == 201
    _fill(c)
    response = await c.client.post(
        "/api/v1/runs",
        json={"name": "full", "command": ["x"], "env": BIG},
        headers=c.auth(c.tokens["vision"]),
    )
    assert (response.status, await response.json()) == (503, FULL)
    assert response.headers["Retry-After"] == "5"
    assert _runs(c) == 1
    status, runs = await c.call("GET", "/api/v1/runs", c.tokens["vision"])
    assert (status, [r["name"] for r in runs["runs"]]) == (200, ["before"])
    await c.report("gpu-01")  # a plain heartbeat is kept in memory: still answered
    _, metrics = await c.call("GET", "/metrics")
    assert "\nastraeus_database_writable 0\n" in metrics
    assert '\nastraeus_database_write_failures_total{problem="disk full"} 1\n' in metrics


async def test_a_report_with_updates_is_refused_whole(fake_cluster: Cluster) -> None:
    """A report whose updates cannot be stored answers 503 and acknowledges nothing: the
    agent keeps them and sends them again after the fault, and they apply in order."""
    c = fake_cluster
    await c.workspace("vision")
    await c.report("gpu-01")
    await c.submit("vision", "finetune", gpus=8)
    await c.run_pass()
    await c.report("gpu-01")
    _fill(c)
    uid = c.uid("gpu-01", "finetune-0")
    logs = [{"task_uid": uid, "offset": 0, "end": 300_000, "data": "y" * 300_000}]
    body = {
        "report": c.records.get("gpu-01").report.model_dump(mode="json"),
        "updates": [{"seq": 0, "task_uid": uid, "state": "Running", "at": START.isoformat()}],
        "logs": logs,
    }
    status, error = await c.call(
        "PUT", "/api/v1/machines/gpu-01/report", c.agent_token("gpu-01"), body
    )
    assert (status, error) == (503, FULL)
    _, task = await c.call("GET", "/api/v1/tasks/finetune-0", c.tokens["vision"])
    assert task["state"] == "Assigned"
    _make_room(c)
    status, reply = await c.call(
        "PUT", "/api/v1/machines/gpu-01/report", c.agent_token("gpu-01"), body
    )
    assert (status, reply["acked_seq"]) == (200, 0)
    _, task = await c.call("GET", "/api/v1/tasks/finetune-0", c.tokens["vision"])
    assert task["state"] == "Running"
    assert_no_gpu_held_twice(c.store)


async def test_a_report_refused_by_a_fault_counts_as_heard(fake_cluster: Cluster) -> None:
    """A machine whose reports carry updates the full disk refuses is still heard from: its
    last-seen time moves in memory, so it stays Up while it keeps reporting (before, it was
    shown Down 30 s into the fault)."""
    c = fake_cluster
    await c.workspace("vision")
    await c.report("gpu-01")
    await c.submit("vision", "finetune", gpus=8)
    await c.run_pass()
    await c.report("gpu-01")
    _fill(c)
    uid = c.uid("gpu-01", "finetune-0")
    body = {
        "report": c.records.get("gpu-01").report.model_dump(mode="json"),
        "updates": [{"seq": 0, "task_uid": uid, "state": "Running", "at": START.isoformat()}],
        "logs": [{"task_uid": uid, "offset": 0, "end": 300_000, "data": "y" * 300_000}],
    }
    token = c.agent_token("gpu-01")
    for _ in range(4):
        c.clock.advance(20)
        status, error = await c.call("PUT", "/api/v1/machines/gpu-01/report", token, body)
        assert (status, error) == (503, FULL)
        _, machine = await c.call("GET", "/api/v1/machines/gpu-01")
        assert machine["state"] == "Up"
    record = c.records.get("gpu-01")
    assert record is not None
    assert (record.last_seen, record.acked_seq) == (c.clock.now(), -1)


async def test_the_end_of_a_fault_blames_no_machine(fake_cluster: Cluster) -> None:
    """A pass first tries a write when a fault is recorded; once one succeeds the fault is over
    (healthz and metrics say so), and machines it could not hear meanwhile are not Lost."""
    c = fake_cluster
    await c.workspace("vision")
    await c.report("gpu-01")
    await c.submit("vision", "finetune", gpus=8)
    await c.run_pass()
    _fill(c)
    assert await _submit(c, "refused") == 503
    c.clock.advance(400)  # no report got through for longer than the Lost grace (300 s)
    assert (await c.run_pass()).lost == 0  # the pass's own small write went through
    assert c.store.database.fault is None
    health = await c.client.get("/healthz")
    assert (health.status, await health.json()) == (200, {"status": "ok"})
    _, machine = await c.call("GET", "/api/v1/machines/gpu-01")
    assert machine["state"] == "Up"
    _, metrics = await c.call("GET", "/metrics")
    assert "\nastraeus_database_writable 1\n" in metrics
    c.clock.advance(301)
    assert (await c.run_pass()).lost == 1  # silent for the whole window since the fault


def test_a_read_only_connection_is_a_storage_fault(tmp_path: Path) -> None:
    """SQLite's own read-only refusal becomes `database is not writable: the file is
    read-only`, and the write connection is opened again before the next try."""
    store = Store.open(tmp_path / "a.db")
    store.database._writer.close()
    store.database._writer = sqlite3.connect(
        f"file:{tmp_path / 'a.db'}?mode=ro", uri=True, isolation_level=None
    )
    assert store.database.probe() is not None
    assert store.database.fault is not None
    assert store.database.fault.error == "database is not writable: the file is read-only"
    assert store.database.probe() is None  # reopened read-write: the fault is over
    store.close()


@pytest.mark.parametrize(
    ("code", "name", "words"),
    [
        pytest.param(13, "SQLITE_FULL", "disk full", id="full"),
        pytest.param(8, "SQLITE_READONLY", "the file is read-only", id="read-only"),
        pytest.param(1032, "SQLITE_READONLY_DBMOVED", "the file is read-only", id="moved"),
        pytest.param(778, "SQLITE_IOERR_WRITE", "I/O error (SQLITE_IOERR_WRITE)", id="io"),
        pytest.param(14, "SQLITE_CANTOPEN", "cannot open the file", id="cantopen"),
        pytest.param(5, "SQLITE_BUSY", "locked by another process", id="busy"),
        pytest.param(11, "SQLITE_CORRUPT", "the file is corrupt (SQLITE_CORRUPT)", id="corrupt"),
    ],
)
def test_storage_problems_in_words(code: int, name: str, words: str) -> None:
    """Each storage error code has the words operators see after `database is not writable:`."""
    error = sqlite3.OperationalError("x")
    error.sqlite_errorcode, error.sqlite_errorname = code, name
    assert storage_problem(error) == (words, code & 0xFF)


def test_other_errors_stay_what_they_are(tmp_path: Path) -> None:
    """A constraint or a bad statement is no storage fault: it is raised as it is and the
    database stays healthy."""
    store = Store.open(tmp_path / "a.db")
    with pytest.raises(sqlite3.OperationalError), store.database.write() as conn:
        conn.execute("INSERT INTO nowhere VALUES (1)")
    assert store.database.fault is None
    store.close()


def test_a_backup_of_a_stopped_database_leaves_its_files_to_their_owner(tmp_path: Path) -> None:
    """A backup while no coordinator runs copies every run, and any -wal or -shm SQLite makes
    for it belongs to the database file's owner (for root: whoever owns the file)."""
    store = Store.open(tmp_path / "a.db")
    store.close()
    for leftover in ("a.db-wal", "a.db-shm"):
        (tmp_path / leftover).unlink(missing_ok=True)
    if os.geteuid() == 0:  # root backs up a database another user owns, as under systemd
        os.chown(tmp_path / "a.db", 4321, 4321)
    summary = backup(tmp_path / "a.db", tmp_path / "copy.db")
    assert (summary.runs, summary.machines, summary.schema_version) == (0, 0, len(MIGRATIONS))
    owner = (tmp_path / "a.db").stat().st_uid
    made = list(tmp_path.glob("a.db-*"))
    assert [leftover.stat().st_uid for leftover in made] == [owner] * len(made)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("copy")) == ["copy.db"]


def test_a_backup_refuses_to_overwrite_the_database(tmp_path: Path) -> None:
    """PATH naming the database itself is refused, and the database is left as it was."""
    store = Store.open(tmp_path / "a.db")
    store.close()
    with pytest.raises(BackupError, match=r"is the database itself: give another path$"):
        backup(tmp_path / "a.db", tmp_path / "a.db")
    assert Store.open(tmp_path / "a.db").database.schema_version == len(MIGRATIONS)


def test_backup_of_a_missing_database_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`astraeus-coordinator backup` with no database at --db exits 1 with one line."""
    missing = tmp_path / "none.db"
    assert main(["backup", "--db", str(missing), str(tmp_path / "copy.db")]) == 1
    assert capsys.readouterr().err == f"astraeus-coordinator: no database at {missing}\n"
    assert not missing.exists()
