"""`astraeus-coordinator migrate --to postgresql://...`: a stopped coordinator's SQLite file
copied into an empty PostgreSQL database (a real server, `tests/pg_server.py`), checked, and
read back by the PostgreSQL store as the same state; refused, with nothing written, for a target
that holds data, a running coordinator, a bad URL, an older file; all or nothing on a failure."""

from __future__ import annotations

import shlex
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pg_server
import pytest
from helpers import hold_port

from astraeus.coordinator.service import main
from astraeus.coordinator.settings import Settings
from astraeus.coordinator.startup import start
from astraeus.coordinator.store import Role, Store
from astraeus.coordinator.store.commit import PlacementRow, WorkerRow, commit_pass
from astraeus.coordinator.store.dialect import PgConnection, pg_connect, quoted
from astraeus.coordinator.store.leader import Leadership
from astraeus.coordinator.store.migrations import MIGRATIONS
from astraeus.coordinator.store.port_rows import set_ports
from astraeus.coordinator.store.transfer import TransferError, check, source_tables
from astraeus.coordinator.store.usage import accrue, read_usage_rows
from astraeus.shared import Landing, RunSpec, Shape
from astraeus.shared.admin import WorkspaceSpec
from astraeus.shared.assignment import LogChunk
from astraeus.shared.machines import ReservationSpec

NOW = datetime(2026, 12, 6, 9, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent / "astraeus-coordinator"
GUIDE_DB = "/var/lib/astraeus/astraeus.db"
GUIDE_URL = "postgresql://astraeus@db.example:5432/astraeus"
HALF_LIFE = 7 * 24 * 3600.0


def _fill(path: Path) -> dict[str, str]:
    """A cluster's state through the store's own API: workspaces, tokens (one revoked),
    machines, a reservation, runs placed (GPUs held), one run of two workers holding a
    rendezvous port, one pending, a log, usage counted. Returns the tokens' secrets."""
    store = Store.open(path)
    try:
        for name in ("vision", "speech"):
            store.workspaces.put(WorkspaceSpec(name=name), NOW)
        secrets = {
            "admin": store.tokens.create(Role.ADMIN, NOW)[0],
            "member": store.tokens.create(Role.MEMBER, NOW, workspace="vision")[0],
        }
        for machine in ("gpu-0", "gpu-1"):
            store.machines.ensure(machine, NOW)
            secrets[machine] = store.tokens.create(Role.AGENT, NOW, machine=machine)[0]
        revoked = store.tokens.create(Role.MEMBER, NOW, workspace="speech")[1]
        assert store.tokens.revoke(revoked.id)  # the highest id: never to be given again
        store.reservations.add(
            "gpu-1",
            ReservationSpec(workspace="speech", starts_at=NOW, ends_at=NOW + timedelta(days=1)),
        )
        ask = RunSpec.model_validate({"name": "r", "command": ["x"]})
        for i in range(4):
            store.runs.submit(ask.model_copy(update={"name": f"r{i}"}), "vision", NOW)
        store.runs.submit(ask.model_copy(update={"name": "gang"}), "speech", NOW)
        seqs = [row["seq"] for row in store.database.read("SELECT seq FROM runs ORDER BY seq")]
        gang = seqs[-1]
        placed = [_placement(seq, f"r{i}", [("gpu-0", str(i))]) for i, seq in enumerate(seqs[:3])]
        placed.append(_placement(gang, "gang", [("gpu-1", "0"), ("gpu-1", "1")]))
        assert commit_pass(store.database, placed, [], NOW) == 4
        worker0 = store.database.read(
            "SELECT id, uid FROM tasks WHERE run_seq = ? AND idx = 0", (gang,)
        )[0]
        assert set_ports(store.database, [(worker0["id"], 29500)]) == 1
        with store.database.write() as conn:
            chunk = LogChunk(task_uid=worker0["uid"], offset=0, end=6, data="hello\n")
            store.agents.append_log(conn, "gpu-1", chunk)
        accrue(store.database, NOW, HALF_LIFE)
        accrue(store.database, NOW + timedelta(hours=1), HALF_LIFE)
    finally:
        store.close()
    return secrets


def _placement(seq: int, run: str, gpus: list[tuple[str, str]]) -> PlacementRow:
    """Run `seq` placed with one worker per (machine, GPU)."""
    workers = tuple(WorkerRow(m, (g,), f'["{g}"]', 1.0, 1024) for m, g in gpus)
    shape = Shape(tasks=len(workers), gpus_each=1, why="test").model_dump_json()
    landing = Landing(rung="node", where=workers[0].machine).model_dump_json()
    return PlacementRow(seq, run, 0, workers, shape, landing, "none", None)


def _state(location: Path | str) -> dict[str, Any]:
    """What the store reads back: runs with their tasks, holds, tokens, reservations, usage,
    machines (with their change-feed stamps), a log."""
    store = Store.open(location)
    try:
        return {
            "runs": [run.model_dump() for run in store.runs.find(None, None)],
            "holds": sorted(store.runs.held_gpu_ids()),
            "ports": store.database.read(
                "SELECT machine, port FROM tasks WHERE port IS NOT NULL ORDER BY id"
            ),
            "tokens": [info.as_dict() for info in store.tokens.all()],
            "reservations": [r.model_dump() for r in store.reservations.of()],
            "usage": read_usage_rows(store.database, NOW + timedelta(hours=1), HALF_LIFE),
            "machines": store.machines.every(),
            "log": store.runs.logs("speech", "gang-0"),
        }
    finally:
        store.close()


def _migrate(db: Path, url: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["migrate", "--db", str(db), "--to", url])
    out, err = capsys.readouterr()
    return code, out, err


def _rows(url: str) -> dict[str, int]:
    """Every table's row count in the PostgreSQL database (the lease left out: the copy held
    it, as a leader would, and gave it up)."""
    conn = PgConnection(pg_connect(url))
    try:
        names = [
            row[0]
            for row in conn.execute(
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_schema = current_schema()"
                " AND table_name NOT IN ('schema_version', 'leadership')"
            ).fetchall()
        ]
        return {
            name: conn.execute(f"SELECT count(*) FROM {quoted(name)}").fetchone()[0]  # noqa: S608
            for name in names
        }
    finally:
        conn.close()


def test_the_copy_reads_back_as_the_same_state(
    tmp_path: Path, postgresql_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every table is copied and checked; the PostgreSQL store then reads the same runs,
    holds, tokens, reservations, usage, machines and log, a token made before authenticates
    after, and new ids continue past the old ones (a revoked token's id is not given again)."""
    db = tmp_path / "astraeus.db"
    secrets = _fill(db)
    before = _state(db)
    code, out, err = _migrate(db, postgresql_url, capsys)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == f"copied {db} (schema {len(MIGRATIONS)}) into {postgresql_url}"
    assert "gpu_holds" in out
    assert any(line.split()[:3] == ["gpu_holds", "5", "5"] for line in lines)
    assert any(line.split()[:3] == ["runs", "5", "5"] for line in lines)
    assert any(line.startswith("port holds checksum sha256:") for line in lines)
    assert lines[-2].endswith("row counts and hold checksums equal on both sides; committed")
    assert lines[-1] == f"next: start the coordinator with --database-url {postgresql_url}"
    assert _state(postgresql_url) == before
    store = Store.open(postgresql_url)
    try:
        for name, secret in secrets.items():
            principal = store.tokens.authenticate(secret)
            assert principal is not None, name
        highest = max(info["id"] for info in before["tokens"])
        _, fresh = store.tokens.create(Role.ADMIN, NOW)
        assert fresh.id == highest + 2  # past the revoked one
        ask = RunSpec.model_validate({"name": "new", "command": ["x"]})
        store.runs.submit(ask, "vision", NOW)
        seqs = [row["seq"] for row in store.database.read("SELECT seq FROM runs ORDER BY seq")]
        assert seqs == [*range(1, 6), 6]
    finally:
        store.close()


def test_a_target_that_holds_data_is_refused_and_left_untouched(
    tmp_path: Path, postgresql_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A database with rows may be another cluster's: refused, naming a table and its rows,
    and nothing in it changes."""
    target = Store.open(postgresql_url)
    target.workspaces.put(WorkspaceSpec(name="theirs"), NOW)
    target.close()
    db = tmp_path / "astraeus.db"
    _fill(db)
    code, out, err = _migrate(db, postgresql_url, capsys)
    assert (code, out) == (1, "")
    assert err == (
        f"astraeus-coordinator: refusing: {postgresql_url} already holds data"
        " (table workspaces: 1 row); migrate only into an empty database\n"
    )
    assert {name: n for name, n in _rows(postgresql_url).items() if n} == {"workspaces": 1}


def test_a_running_coordinator_is_refused(
    tmp_path: Path, postgresql_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The file's coordinator must be stopped: while one holds its lock the copy is refused
    with the lock's own text, and the target gets nothing."""
    db = tmp_path / "astraeus.db"
    _fill(db)
    started = start(Settings(db=db, state_dir=tmp_path))
    assert not isinstance(started, str), started
    held, store, _records = started
    try:
        code, out, err = _migrate(db, postgresql_url, capsys)
    finally:
        store.close()
        held.release()
    assert (code, out) == (1, "")
    assert err.startswith(f"astraeus-coordinator: {db} is in use by another coordinator (pid ")
    assert "stop that one first" in err
    assert not any(_rows(postgresql_url).values())


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("sqlite:///x.db", "--to 'sqlite:///x.db' is not a postgresql:// URL"),
        ("postgresql://astraeus@127.0.0.1:{closed}/x", "cannot reach the database server"),
        ("postgresql://astraeus@127.0.0.1:{port}/no_such_db", 'database "no_such_db" does not'),
        ("postgresql://astraeus@127.0.0.1:{port}/x?sslmode=bogus", "cannot open postgresql://"),
    ],
    ids=["not-postgresql", "nothing-listens", "no-such-database", "bad-option"],
)
def test_a_bad_url_is_a_clear_error(
    tmp_path: Path,
    postgresql_server: pg_server.Server,
    capsys: pytest.CaptureFixture[str],
    url: str,
    said: str,
) -> None:
    """A URL of another engine, a server that does not answer, a database that does not exist
    or a bad option: one line saying so, exit 1, no traceback."""
    db = tmp_path / "astraeus.db"
    _fill(db)
    closed = hold_port()
    try:
        given = url.format(port=postgresql_server.port, closed=closed.getsockname()[1])
        code, out, err = _migrate(db, given, capsys)
    finally:
        closed.close()
    assert (code, out) == (1, "")
    assert err.startswith("astraeus-coordinator: ")
    assert said in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_an_older_file_is_refused_and_left_as_it_was(
    tmp_path: Path, postgresql_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file of an older schema is not migrated in place: the operator starts this version's
    coordinator on it once first; the file keeps its version."""
    db = tmp_path / "astraeus.db"
    _fill(db)
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version=11")
    conn.close()
    code, _, err = _migrate(db, postgresql_url, capsys)
    assert code == 1
    assert err == (
        f"astraeus-coordinator: {db} is at schema version 11, this astraeus at"
        f" {len(MIGRATIONS)}: start this version's coordinator on it once (it brings the file"
        " up to date as it starts), stop it, then run migrate again\n"
    )
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 11
    conn.close()


@pytest.mark.parametrize(
    ("bad", "table", "said", "undo"),
    [
        (
            "INSERT INTO gpu_holds (machine, gpu_id, task_id) VALUES ('gpu-1', '7', 999)",
            "gpu_holds",
            "foreign key",
            "DELETE FROM gpu_holds WHERE task_id = 999",
        ),
        (
            "UPDATE logs SET data = 'a' || char(0) || 'b'",
            "logs",
            "cannot contain NUL",
            "UPDATE logs SET data = 'hello' || char(10)",
        ),
    ],
    ids=["gpu-hold-of-no-task", "nul-in-a-log"],
)
def test_a_failure_mid_copy_leaves_the_target_empty(
    tmp_path: Path,
    postgresql_url: str,
    capsys: pytest.CaptureFixture[str],
    bad: str,
    table: str,
    said: str,
    undo: str,
) -> None:
    """A row PostgreSQL refuses (a GPU hold of a task that does not exist, which SQLite took
    with its foreign keys off; a NUL in a log line, which SQLite's text holds and PostgreSQL's
    does not) fails the copy at its table, after others were copied: all of it is rolled back,
    and the same target takes the copy once the row is mended."""
    db = tmp_path / "astraeus.db"
    _fill(db)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute(bad)
    code, out, err = _migrate(db, postgresql_url, capsys)
    assert (code, out) == (1, "")
    assert err.startswith(
        f"astraeus-coordinator: copying table {table} failed, nothing was written to"
        f" {postgresql_url}: "
    )
    assert said in err
    assert len(err.splitlines()) == 1
    assert not any(_rows(postgresql_url).values())
    conn.execute(undo)
    conn.close()
    code, _, err = _migrate(db, postgresql_url, capsys)
    assert (code, err) == (0, "")


def test_the_check_names_the_table_or_hold_that_differs(
    tmp_path: Path, postgresql_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The check compares every table's row count and the holds' checksums: a row missing
    from the target is named by its table, a hold changed by its kind."""
    db = tmp_path / "astraeus.db"
    _fill(db)
    assert _migrate(db, postgresql_url, capsys)[0] == 0
    reader = sqlite3.connect(db)
    target = PgConnection(pg_connect(postgresql_url))
    try:
        order = source_tables(reader)
        tables, checksums = check(reader, target, order)
        assert [t.name for t in tables] == order
        assert set(checksums) == {"gpu_holds", "port holds"}
        target.execute("UPDATE tasks SET port = 29501 WHERE port = 29500")
        with pytest.raises(TransferError, match=r"^check failed, rolled back: the port holds"):
            check(reader, target, order)
        target.execute("DELETE FROM logs")
        with pytest.raises(
            TransferError,
            match=r"^check failed, rolled back: table logs has 1 rows in the file and 0 in",
        ):
            check(reader, target, order)
    finally:
        target.close()
        reader.close()


def _guide_section() -> str:
    text = (ROOT / "docs" / "operator.md").read_text()
    return text.split("### Moving to PostgreSQL\n", 1)[1].split("\n### ", 1)[0]


def test_the_operators_guide_runs_as_printed(tmp_path: Path, postgresql_url: str) -> None:
    """docs/operator.md's `migrate` command, with the test's file and database in place of the
    guide's, copies the file, and prints the lines the guide shows."""
    section = _guide_section()
    script = section.split("```sh\n", 1)[1].split("```", 1)[0].replace("\\\n", " ")
    line = next(line for line in script.splitlines() if " migrate " in line)
    db = tmp_path / "astraeus.db"
    _fill(db)
    command = (
        line.replace("/opt/astraeus/bin/astraeus-coordinator", str(BIN))
        .replace(GUIDE_DB, str(db))
        .replace(GUIDE_URL, postgresql_url)
    )
    done = subprocess.run(
        shlex.split(command), capture_output=True, text=True, check=False, timeout=120
    )
    assert (done.returncode, done.stderr) == (0, "")
    shown = section.split("```\n", 2)[2].split("```", 1)[0].splitlines()
    printed = done.stdout.splitlines()
    assert printed[0] == shown[0].replace(GUIDE_DB, str(db)).replace(GUIDE_URL, postgresql_url)
    assert printed[1] == shown[1]
    assert printed[-1] == shown[-1].replace(GUIDE_URL, postgresql_url)
    assert printed[-2].endswith(shown[-2].partition(" rows, ")[2])


def test_a_target_a_coordinator_leads_is_refused(
    tmp_path: Path, postgresql_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The copy holds the target's lease as a leader would: a database another coordinator
    leads is refused, naming it, and nothing is written there."""
    db = tmp_path / "astraeus.db"
    _fill(db)
    leader = Leadership(postgresql_url, advertise="https://coord-1.example:8470", lease_seconds=30)
    try:
        assert leader.take() == 1
        code, _, err = _migrate(db, postgresql_url, capsys)
    finally:
        leader.close()
    assert code == 1
    assert err == (
        f"astraeus-coordinator: refusing: {postgresql_url} is in use by another coordinator"
        f" ({leader.holder}, at https://coord-1.example:8470); migrate only into an empty"
        " database no coordinator serves\n"
    )
    assert not any(_rows(postgresql_url).values())
