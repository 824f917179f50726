"""The database: numbered migrations (on both engines), WAL, and explanations stored once."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from astraeus.coordinator.machine_records import MachineRecords
from astraeus.coordinator.store import NameTakenError, Role, Store
from astraeus.coordinator.store.commit import PlacementRow, WorkerRow, commit_pass
from astraeus.coordinator.store.db import _statements
from astraeus.coordinator.store.migrations import MIGRATIONS
from astraeus.coordinator.store.tokens import digest
from astraeus.shared import RunSpec
from astraeus.shared.admin import WorkspaceSpec
from astraeus.shared.reasons import ReasonKind

from .conftest import Cluster

NOW = datetime(2026, 10, 1, 9, tzinfo=UTC)

EXPLANATION = (
    '{"checked_nodes": 1, "ready_nodes": 1, "down_nodes": 0, "closest": null, "nodes": [],'
    ' "evaluated_at": "2026-10-01T09:00:00+00:00"}'
)


def test_a_new_file_gets_every_migration_in_wal_mode(tmp_path: Path) -> None:
    """A new database runs all migrations, records how many, and is in WAL mode."""
    store = Store.open(tmp_path / "a.db")
    assert store.database.schema_version == len(MIGRATIONS)
    assert store.database.read("PRAGMA journal_mode")[0]["journal_mode"] == "wal"
    store.close()
    again = Store.open(tmp_path / "a.db")
    assert again.database.schema_version == len(MIGRATIONS)
    again.close()


def test_a_new_database_gets_every_migration(database_location: Path | str) -> None:
    """On either engine a new database runs all migrations, records how many, and opening it
    again runs none; the tables the store writes are all there."""
    store = Store.open(database_location)
    assert store.database.schema_version == len(MIGRATIONS)
    store.close()
    again = Store.open(database_location)
    assert again.database.schema_version == len(MIGRATIONS)
    assert [row["n"] for row in again.database.read("SELECT count(*) AS n FROM gpu_holds")] == [0]
    again.close()


def test_version_1_file_keeps_its_explanations(tmp_path: Path) -> None:
    """Opening a file made by migration 1 moves each task's explanation to its own table."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in _statements(MIGRATIONS[0]):
        conn.execute(statement)
    conn.execute("PRAGMA user_version=1")
    conn.execute(
        "INSERT INTO runs (workspace, name, spec, priority, state, submitted_at) VALUES"
        """ ('vision', 'a', '{"command": ["x"], "requested_resources": {}}', 0, 'Pending',"""
        " '2026-10-01T09:00:00+00:00')"
    )
    conn.execute(
        "INSERT INTO tasks (run_seq, idx, name, state, reason, placement)"
        " VALUES (1, 0, 'a-0', 'Pending', 'No machine fits: 1 of 1 machines ready', ?)",
        (EXPLANATION,),
    )
    conn.close()
    store = Store.open(path)
    task = store.runs.task("vision", "a-0")
    assert task is not None
    assert task.placement is not None
    assert task.placement.checked_nodes == 1
    assert store.database.schema_version == len(MIGRATIONS)
    store.close()


def test_reasons_stored_before_kinds_are_explained_again(tmp_path: Path) -> None:
    """Migration 6 clears the reasons of waiting runs and tasks stored without a kind (they read
    `NotEvaluated` until the next pass explains them), and keeps how ended runs ended."""
    path = tmp_path / "v5.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for migration in MIGRATIONS[:5]:
        for statement in _statements(migration):
            conn.execute(statement)
    conn.execute("PRAGMA user_version=5")
    for name, state, reason in (
        ("a", "Pending", "Queued behind b"),
        ("c", "Failed", "c-0 Failed (exit 3)"),
    ):
        conn.execute(
            "INSERT INTO runs (workspace, name, spec, priority, state, reason, submitted_at)"
            """ VALUES ('vision', ?, '{"command": ["x"], "requested_resources": {}}', 0, ?, ?,"""
            " '2026-10-01T09:00:00+00:00')",
            (name, state, reason),
        )
    conn.execute(
        "INSERT INTO tasks (run_seq, idx, name, state, reason, uid)"
        " VALUES (1, 0, 'a-0', 'Pending', 'Queued behind b', 'u-1')"
    )
    conn.close()
    store = Store.open(path)
    waiting, failed = store.runs.get("vision", "a"), store.runs.get("vision", "c")
    assert waiting is not None
    assert failed is not None
    assert (waiting.reason, waiting.reason_kind) == (None, ReasonKind.NOT_EVALUATED)
    assert (waiting.tasks[0].reason, waiting.tasks[0].reason_kind) == (
        None,
        ReasonKind.NOT_EVALUATED,
    )
    assert (failed.reason, failed.reason_kind) == ("c-0 Failed (exit 3)", None)
    store.close()


async def test_runs_asking_alike_share_one_stored_explanation(store_cluster: Cluster) -> None:
    """Ten identical waiting runs point at one stored explanation; old ones are dropped."""
    c = store_cluster
    await c.workspace("vision")
    await c.report("gpu-01", gpus=4)
    for i in range(10):
        await c.submit("vision", f"r{i}", gpus=8)
    await c.run_pass()
    rows = c.store.database.read("SELECT count(*) AS n FROM explanations")
    assert rows[0]["n"] == 1
    _, task = await c.call("GET", "/api/v1/tasks/r9-0", c.tokens["vision"])
    assert task["placement"]["nodes"][0]["reasons"] == [
        "insufficient gpus: need 8, 4 free and usable"
    ]
    await c.report("gpu-01", gpus=8)
    await c.run_pass()
    held = c.store.database.read("SELECT count(*) AS n FROM explanations")[0]["n"]
    assert held == 2  # r0 placed; r1 is the head with its own, r2..r9 share one


async def test_a_reader_reparses_only_reports_that_changed(store_cluster: Cluster) -> None:
    """A second process's view of the file (the pass worker's) re-reads a machine's report
    only when its `report_version` moved: a heartbeat leaves the parsed report as it was."""
    c = store_cluster
    await c.report("gpu-01")
    await c.report("gpu-02")
    opened = Store.open(c.store.database.location)
    reader = MachineRecords(opened)
    kept = reader.get("gpu-01")
    assert kept is not None
    c.clock.advance(2)
    await c.report("gpu-01")
    await c.report("gpu-02", gpus=4)
    c.records.flush_seen()
    reader.reload()
    one, two = reader.get("gpu-01"), reader.get("gpu-02")
    assert one is not None
    assert two is not None
    assert one.report is kept.report
    assert one.last_seen == c.clock.now()
    assert two.report is not None
    assert len(two.report.gpus) == 4
    versions = c.store.database.read("SELECT name, report_version FROM machines ORDER BY name")
    assert [(v["name"], v["report_version"]) for v in versions] == [("gpu-01", 1), ("gpu-02", 2)]
    opened.close()


def test_migration_10_keeps_every_token_and_its_id(tmp_path: Path) -> None:
    """Tokens made before ids stopped being reused keep their ids and still authenticate."""
    path = tmp_path / "v9.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for migration in MIGRATIONS[:9]:
        for statement in _statements(migration):
            conn.execute(statement)
    conn.execute("PRAGMA user_version=9")
    conn.execute("INSERT INTO workspaces (name, created_at) VALUES ('w', '2026-10-01')")
    for token_id, role, workspace in ((3, "admin", None), (7, "member", "w")):
        conn.execute(
            "INSERT INTO tokens (id, hash, role, workspace, created_at)"
            " VALUES (?, ?, ?, ?, '2026-10-01')",
            (token_id, digest(f"astr_{token_id}"), role, workspace),
        )
    conn.close()
    store = Store.open(path)
    found = [store.tokens.authenticate(secret) for secret in ("astr_3", "astr_7")]
    assert [(p.token_id, p.role) for p in found if p] == [(3, Role.ADMIN), (7, Role.MEMBER)]
    assert store.tokens.revoke(7)
    _, info = store.tokens.create(Role.ADMIN, datetime(2026, 10, 2, tzinfo=UTC))
    assert info.id == 8
    store.close()


def _spec(name: str, gpus: int = 1) -> RunSpec:
    return RunSpec.model_validate(
        {"name": name, "command": ["x"], "requested_resources": {"gpu_requests": {"count": gpus}}}
    )


def _submit(store: Store, name: str) -> int:
    """Submit a 1-GPU run; its sequence number."""
    store.runs.submit(_spec(name), "w", NOW)
    row = store.database.read_one("SELECT seq FROM runs WHERE name = ?", (name,))
    assert row is not None
    return int(row["seq"])


def _seq(store: Store, name: str) -> int:
    row = store.database.read_one("SELECT seq FROM runs WHERE name = ?", (name,))
    assert row is not None
    return int(row["seq"])


def _on(seq: int, run: str, machine: str, gpu: str) -> PlacementRow:
    worker = WorkerRow(machine, (gpu,), json.dumps([gpu]), 0.0, 0)
    return PlacementRow(seq, run, 0, (worker,), "{}", '{"rung": "node"}', "none", None)


def test_a_gpu_is_never_held_twice(database_location: Path | str) -> None:
    """Two placements in one commit that want the same GPU: the hold's key refuses the second,
    which loses only its own placement (its savepoint), not the other's or the pass's."""
    store = Store.open(database_location)
    try:
        store.workspaces.put(WorkspaceSpec(name="w"), NOW)
        a, b, c = (_submit(store, name) for name in "abc")
        placed = [
            _on(a, "a", "m", "g0"),
            _on(b, "b", "m", "g0"),
            _on(c, "c", "m", "g1"),
        ]
        assert commit_pass(store.database, placed, [], NOW) == 2
        runs = store.database.read("SELECT name, state FROM runs ORDER BY seq")
        assert {row["name"]: row["state"] for row in runs} == {
            "a": "Running",
            "b": "Pending",
            "c": "Running",
        }
        assert store.runs.held_gpu_ids() == {("m", "g0"), ("m", "g1")}
        tasks = store.database.read("SELECT name, state, machine FROM tasks ORDER BY id")
        assert [(t["name"], t["state"], t["machine"]) for t in tasks] == [
            ("a-0", "Assigned", "m"),
            ("b-0", "Pending", None),
            ("c-0", "Assigned", "m"),
        ]
    finally:
        store.close()


def test_a_chunk_places_what_one_placement_at_a_time_would(
    database_location: Path | str,
) -> None:
    """A chunk written at once (`place_runs`) skips a run cancelled while the pass was decided
    and a second decision for a task already placed, writes every worker of a gang with its
    GPUs held by its own task, and counts only what it placed."""
    store = Store.open(database_location)
    try:
        store.workspaces.put(WorkspaceSpec(name="w"), NOW)
        a, gone = (_submit(store, name) for name in ("a", "gone"))
        store.runs.submit(_spec("gang", gpus=2), "w", NOW)
        gang = _seq(store, "gang")
        store.runs.cancel("w", "gone", NOW)
        two = tuple(
            WorkerRow(m, (g,), json.dumps([g]), 0.0, 0) for m, g in (("m", "g1"), ("n", "g0"))
        )
        placed = [
            _on(a, "a", "m", "g0"),
            _on(gone, "gone", "m", "g2"),
            _on(a, "a", "m", "g3"),
            PlacementRow(gang, "gang", 0, two, "{}", '{"rung": "node"}', "none", None),
        ]
        assert commit_pass(store.database, placed, [], NOW) == 2
        holds = store.database.read(
            "SELECT gpu_holds.machine, gpu_holds.gpu_id, tasks.name FROM gpu_holds"
            " JOIN tasks ON tasks.id = gpu_holds.task_id ORDER BY tasks.name"
        )
        assert [(h["machine"], h["gpu_id"], h["name"]) for h in holds] == [
            ("m", "g0", "a-0"),
            ("m", "g1", "gang-0"),
            ("n", "g0", "gang-1"),
        ]
        runs = store.database.read("SELECT name, state FROM runs ORDER BY seq")
        assert [(r["name"], r["state"]) for r in runs] == [
            ("a", "Running"),
            ("gone", "Cancelled"),
            ("gang", "Running"),
        ]
    finally:
        store.close()


def test_a_rendezvous_port_is_never_held_twice(database_location: Path | str) -> None:
    """Two live tasks of one machine cannot hold the same port; an ended one lets it go."""
    store = Store.open(database_location)
    try:
        store.workspaces.put(WorkspaceSpec(name="w"), NOW)
        a, b = (_submit(store, name) for name in "ab")
        placed = [_on(a, "a", "m", "g0"), _on(b, "b", "m", "g1")]
        assert commit_pass(store.database, placed, [], NOW) == 2
        ids = [row["id"] for row in store.database.read("SELECT id FROM tasks ORDER BY id")]
        with store.database.write() as conn:
            conn.execute("UPDATE tasks SET port = 29500 WHERE id = ?", (ids[0],))
        with pytest.raises(sqlite3.IntegrityError), store.database.write() as conn:
            conn.execute("UPDATE tasks SET port = 29500 WHERE id = ?", (ids[1],))
        with store.database.write() as conn:
            conn.execute("UPDATE tasks SET state = 'Succeeded' WHERE id = ?", (ids[0],))
            conn.execute("UPDATE tasks SET port = 29500 WHERE id = ?", (ids[1],))
        ports = store.database.read("SELECT id, port FROM tasks ORDER BY id")
        assert [(row["id"], row["port"]) for row in ports] == [(ids[0], 29500), (ids[1], 29500)]
    finally:
        store.close()


def test_a_failed_transaction_leaves_nothing(database_location: Path | str) -> None:
    """A write that fails part way (a constraint, or any error) leaves nothing of itself: a
    submission whose name is taken stores no second run and no tasks."""
    store = Store.open(database_location)
    try:
        store.workspaces.put(WorkspaceSpec(name="w"), NOW)
        store.runs.submit(_spec("a"), "w", NOW)
        with pytest.raises(NameTakenError):
            store.runs.submit(_spec("a"), "w", NOW)
        with pytest.raises(RuntimeError, match="midway"):
            _half_written(store)
        counts = store.database.read(
            "SELECT (SELECT count(*) FROM runs) AS runs, (SELECT count(*) FROM tasks) AS tasks"
        )
        assert counts == [{"runs": 1, "tasks": 1}]
    finally:
        store.close()


def _half_written(store: Store) -> None:
    with store.database.write() as conn:
        conn.execute(
            "INSERT INTO runs (workspace, name, spec, priority, state, submitted_at)"
            " VALUES ('w', 'half', '{}', 0, 'Pending', ?)",
            (NOW.isoformat(),),
        )
        raise RuntimeError("midway")


def test_migration_16_gives_every_run_its_own_uid(tmp_path: Path) -> None:
    """Runs stored before runs had uids get one each, distinct, and stay reachable by name."""
    path = tmp_path / "v14.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for migration in MIGRATIONS[:14]:
        for statement in _statements(migration):
            conn.execute(statement)
    conn.execute("PRAGMA user_version=14")
    for name in ("a", "b"):
        conn.execute(
            "INSERT INTO runs (workspace, name, spec, priority, state, submitted_at)"
            """ VALUES ('vision', ?, '{"command": ["x"], "requested_resources": {}}', 0,"""
            " 'Succeeded', '2026-10-01T09:00:00+00:00')",
            (name,),
        )
    conn.close()
    store = Store.open(path)
    found = [store.runs.get("vision", name) for name in ("a", "b")]
    uids = {run.uid for run in found if run is not None}
    assert len(uids) == 2
    assert None not in uids
    store.close()
