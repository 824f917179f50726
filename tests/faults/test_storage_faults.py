"""Storage faults under a real coordinator process: a full file system (a small tmpfs), a
read-only database file, and a real I/O error (a file-size limit set on the running process)."""

from __future__ import annotations

import contextlib
import os
import resource
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import until

from astraeus.coordinator.store import StorageError
from astraeus.coordinator.store.db import Database

from .rig import PATIENT, Cluster, Coordinator, invariants, machine_report

BIG = {"BLOB": "x" * 200_000}
"""An environment large enough that storing the run needs new space."""


def _mount(*argv: str) -> None:
    done = subprocess.run(["mount", *argv], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"mount {' '.join(argv)} is not allowed here: {done.stderr.strip()}")


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


@contextlib.contextmanager
def _read_only(path: Path) -> Iterator[contextlib.ExitStack]:
    """`path` read-only until the yielded stack is closed: mode 0444 for a user (whom the
    kernel holds to it), a read-only bind mount for root (whom modes do not stop)."""
    with contextlib.ExitStack() as undo:
        if os.geteuid() != 0:
            path.chmod(0o555 if path.is_dir() else 0o444)
            undo.callback(path.chmod, 0o700 if path.is_dir() else 0o600)
        else:
            _mount("--bind", str(path), str(path))
            undo.callback(_umount, path)
            _mount("-o", "remount,ro,bind", str(path))
            undo.callback(_mount, "-o", "remount,rw,bind", str(path))
        yield undo


def _cluster(c: Coordinator) -> str:
    """A workspace, two reported machines and a placed run; returns the member token."""
    c.ok("PUT", "/api/v1/workspaces/w", {})
    member = c.ok("POST", "/api/v1/tokens", {"role": "member", "workspace": "w"})["token"]
    for name in ("m1", "m2"):
        token = c.ok("POST", "/api/v1/tokens", {"role": "agent", "machine": name})["token"]
        c.ok("PUT", f"/api/v1/machines/{name}/report", {"report": machine_report(name)}, token)
    _submit(c, member, "placed", env={})
    until(
        "a placement",
        lambda: c.ok("GET", "/api/v1/runs/placed", token=member)["state"] == "Running",
    )
    return member


def _submit(
    c: Coordinator, member: str, name: str, env: dict[str, str] | None = None
) -> tuple[int, Any]:
    spec = {
        "name": name,
        "command": ["x"],
        "env": BIG if env is None else env,
        "requested_resources": {"gpu_requests": {"count": 1}},
    }
    return c.call("POST", "/api/v1/runs", spec, member)


def _refused(c: Coordinator, problem: str) -> None:
    """Reads work, /healthz and the metrics name the fault."""
    error = f"database is not writable: {problem}"
    status, health = c.health()
    assert (status, health["status"], health["error"], health["fields"]) == (
        503,
        "failing",
        error,
        [],
    )
    assert c.call("GET", "/api/v1/runs?workspace=w")[0] == 200
    metrics = c.ok("GET", "/metrics").decode()
    assert "\nastraeus_database_writable 0\n" in metrics
    assert f'astraeus_database_write_failures_total{{problem="{problem}"}} ' in metrics


def _recovers(c: Coordinator, member: str) -> None:
    until("the coordinator to recover by itself", lambda: c.health()[0] == 200)
    assert _submit(c, member, "after")[0] == 201
    assert "\nastraeus_database_writable 1\n" in c.ok("GET", "/metrics").decode()


def test_a_read_only_database_serves_reads_and_recovers(tmp_path: Path) -> None:
    """Started on a read-only file it serves reads, answers writes 503 with the JSON error,
    /healthz answers 503 naming the fault, and once the file is writable again it recovers
    without a restart; nothing was half-written."""
    c = Coordinator(tmp_path)
    c.start(PATIENT)
    member = _cluster(c)
    assert c.stop() == 0
    with _read_only(c.db) as undo:
        c.start(PATIENT)
        status, error = _submit(c, member, "refused")
        assert (status, error) == (
            503,
            {"error": "database is not writable: the file is read-only", "fields": []},
        )
        _refused(c, "the file is read-only")
        undo.close()
        _recovers(c, member)
        assert c.stop() == 0
    assert c.process is not None
    assert "is not writable: the file is read-only" in c.process.output
    _two_runs(c.db)


def test_a_read_only_file_system_serves_reads_and_recovers(tmp_path: Path) -> None:
    """Started where the database's whole file system takes no writes (SQLite cannot even make
    its shared-memory file beside the database), the coordinator still starts: it serves
    reads, answers writes and /healthz 503 naming the fault, and recovers without a restart
    once the file system takes writes again. Before, it exited: `unable to open database
    file`."""
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    c = Coordinator(tmp_path, db=data / "astraeus.db")
    c.start(PATIENT)
    member = _cluster(c)
    assert c.stop() == 0
    with _read_only(data) as undo:
        c.start(PATIENT)
        assert [run["name"] for run in c.ok("GET", "/api/v1/runs?workspace=w")["runs"]] == [
            "placed"
        ]
        status, error = _submit(c, member, "refused")
        assert status == 503
        _refused(c, error["error"].removeprefix("database is not writable: "))
        undo.close()
        _recovers(c, member)
        assert c.stop() == 0
    assert c.process is not None
    assert "is opened read-only" in c.process.output
    _two_runs(c.db)


def test_a_full_disk_refuses_writes_and_recovers(tmp_path: Path) -> None:
    """On a full file system (a 3 MiB tmpfs) submissions answer 503 `database is not writable:
    disk full` and leave nothing; reads go on; freeing space ends the fault by itself."""
    disk = tmp_path / "disk"
    disk.mkdir()
    _mount("-t", "tmpfs", "-o", "size=3m", "tmpfs", str(disk))
    try:
        c = Coordinator(disk)
        c.start(PATIENT)
        member = _cluster(c)
        filler = disk / "filler"
        with contextlib.suppress(OSError), filler.open("wb") as out:
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        accepted = []
        for i in range(50):
            status, answer = _submit(c, member, f"r{i}")
            if status == 503:
                break
            accepted.append(f"r{i}")
        assert (status, answer) == (
            503,
            {"error": "database is not writable: disk full", "fields": []},
        )
        _refused(c, "disk full")
        filler.unlink()
        _recovers(c, member)
        names = {r["name"] for r in c.ok("GET", "/api/v1/runs", token=member)["runs"]}
        assert names == {"placed", "after", *accepted}
        assert c.stop() == 0
        assert sum(invariants(c.db).values()) == len(accepted) + 2
    finally:
        _umount(disk)


def _fill(disk: Path) -> Path:
    """Fill the file system `disk` to its last byte; returns the file that fills it."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as out:
        for size in (65536, 512, 1):
            with contextlib.suppress(OSError):
                while True:
                    out.write(b"\0" * size)
    return filler


def test_a_full_disk_keeps_a_reporting_machine_up(tmp_path: Path) -> None:
    """A real agent whose job ends on a full disk: every report it sends carries the job's end,
    which the coordinator cannot store (503). The machine still counts as heard and stays Up
    all along (before, it was shown Down within the Down window); the run stays Running until
    the disk has room, then the agent's kept update ends it Succeeded."""
    disk = tmp_path / "disk"
    disk.mkdir()
    _mount("-t", "tmpfs", "-o", "size=3m", "tmpfs", str(disk))
    cluster = Cluster(tmp_path)
    # Only the database on the small disk: the coordinator's log and token stay writable.
    cluster.coordinator = c = Coordinator(cluster.coordinator.root, db=disk / "astraeus.db")
    try:
        # Down after 3 s: a refused report's Retry-After is whole seconds (1 here), and the agent
        # waits up to half again, so the rig's 1.5 s window would be too short.
        c.start({"ASTRAEUS_DOWN_AFTER_SECONDS": "3", "ASTRAEUS_LOST_AFTER_SECONDS": "5"})
        c.ok("PUT", "/api/v1/workspaces/faults", {})
        token = c.ok("POST", "/api/v1/tokens", {"role": "member", "workspace": "faults"})
        cluster.member = token["token"]
        cluster.agent("m1")
        cluster.submit("job", 1)
        cluster.started("job")
        filler = _fill(disk)
        for i in range(50):
            status, _ = _submit(c, cluster.member, f"r{i}")
            if status == 503:
                break
        assert status == 503
        cluster.release("job")
        states = []
        end = time.monotonic() + 4.5
        while time.monotonic() < end:
            states.append(cluster.machine("m1")["state"])
            assert cluster.run("job")["state"] == "Running"  # its end is not stored yet
            time.sleep(0.1)
        assert set(states) == {"Up"}, states
        assert c.health()[0] == 503  # the fault lasted all along
        filler.unlink()
        until("the kept update to end the job", lambda: cluster.state("job", "Succeeded"))
    finally:
        cluster.stop()
        _umount(disk)


def test_an_io_error_refuses_writes_and_recovers(tmp_path: Path) -> None:
    """A real I/O error (the running coordinator may write no file past its first byte, so
    the kernel fails SQLite's writes with EFBIG) answers 503 `database is not writable: I/O
    error (SQLITE_IOERR_WRITE)`; lifting the limit ends the fault by itself."""
    c = Coordinator(tmp_path)
    c.start(PATIENT)
    assert c.process is not None
    member = _cluster(c)
    pid = c.process.proc.pid
    _, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (1, hard))
    status, error = _submit(c, member, "refused")
    problem = "I/O error (SQLITE_IOERR_WRITE)"
    assert (status, error) == (503, {"error": f"database is not writable: {problem}", "fields": []})
    _refused(c, problem)
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (hard, hard))
    _recovers(c, member)
    assert c.stop() == 0
    _two_runs(c.db)


def _two_runs(db: Path) -> None:
    """`placed` and `after` and nothing else, whether a pass placed `after` before the stop."""
    states = invariants(db)
    assert sum(states.values()) == 2
    assert set(states) <= {"Running", "Pending"}


def test_a_small_write_on_a_full_disk_does_not_end_the_fault(tmp_path: Path) -> None:
    """On a full disk a write that fits in pages SQLite already holds still succeeds while the
    next one that needs a new page fails. Such a success must not end `disk full` (the gauge and
    /healthz flapped from one write to the next, which a CI run caught); the fault ends at the
    first write after the file system has room again."""
    disk = tmp_path / "disk"
    disk.mkdir()
    _mount("-t", "tmpfs", "-o", "size=3m", "tmpfs", str(disk))
    try:
        database = Database(disk / "astraeus.db")
        other = sqlite3.connect(disk / "astraeus.db")
        for _ in range(8):  # the probe's row and page are in the file; the WAL has frames
            assert database.probe() is None
            assert other.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[0] == 0
        filler = _fill(disk)
        # Checkpointed in full, the next write starts the WAL over, in frames it already has.
        assert other.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[0] == 0
        other.close()
        with pytest.raises(StorageError), database.write() as conn:
            conn.execute("UPDATE write_probe SET at = ?", ("x" * 400_000,))
        assert database.fault is not None
        assert database.fault.problem == "disk full"
        with database.write() as conn:  # the small write fits in the WAL's frames and succeeds
            conn.execute("INSERT OR REPLACE INTO write_probe (id, at) VALUES (1, 'now')")
        assert database.fault is not None
        assert database.fault.problem == "disk full"
        filler.unlink()
        assert database.probe() is None
        database.close()
    finally:
        _umount(disk)
