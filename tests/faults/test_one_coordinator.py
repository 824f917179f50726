"""One coordinator per database, and a clean stop on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
from collections.abc import Callable
from pathlib import Path

import aiohttp
import pytest
from helpers import until, until_async

from .rig import PATIENT, Coordinator, alive, invariants, machine_report

pytestmark = pytest.mark.slow  # several coordinator processes each

REFUSAL = re.compile(
    r"astraeus-coordinator: (?P<db>\S+) is in use by another coordinator \(pid (?P<pid>\d+)"
    r" on (?P<host>\S+), since \S+\); one coordinator per database: stop that one first,"
    r" or give this one another --db\n"
)


def test_a_second_coordinator_on_the_same_file_refuses(tmp_path: Path) -> None:
    """A second `serve` on the same file exits 1 with one line naming the holder, touching
    nothing; after SIGKILL of the first a new one starts at once, on the same file."""
    first = Coordinator(tmp_path)
    first.start()
    assert first.process is not None
    second = Coordinator(tmp_path)
    refused = second.start(ready=False)
    assert refused.wait() == 1
    found = REFUSAL.fullmatch(refused.output)
    assert found is not None, refused.output
    assert (found["db"], int(found["pid"]), found["host"]) == (
        str(first.db),
        first.process.proc.pid,
        socket.gethostname(),
    )
    assert first.health() == (200, {"status": "ok"})

    first.kill()
    third = Coordinator(tmp_path, port=first.port)
    third.start()
    assert third.health() == (200, {"status": "ok"})
    assert third.stop() == 0


def _symlink(db: Path, other: Path) -> Path:
    (other / "link.db").symlink_to(db)
    return other / "link.db"


def _hard_link(db: Path, other: Path) -> Path:
    os.link(db, other / "link.db")
    return other / "link.db"


def _relative(db: Path, other: Path) -> Path:
    """The same file by a path with `..` in it, from another directory."""
    return other / ".." / db.name


@pytest.mark.parametrize("path", [_symlink, _hard_link, _relative])
def test_a_second_coordinator_through_another_path_refuses(
    tmp_path: Path, path: Callable[[Path, Path], Path]
) -> None:
    """A second `serve` given a symbolic link, a hard link or another spelling of the live file
    meets the same lock (it is the file's own, not a name's): it exits 1 naming the first, and
    leaves no WAL of its own beside the other name. Before, each name took its own lock file,
    opened a second WAL, and a minute later ended the first one's running tasks as Lost."""
    first = Coordinator(tmp_path)
    first.start()
    assert first.process is not None
    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    second = Coordinator(other, db=path(first.db, other))
    refused = second.start(ready=False)
    assert refused.wait() == 1
    found = REFUSAL.fullmatch(refused.output)
    assert found is not None, refused.output
    assert int(found["pid"]) == first.process.proc.pid
    assert not (other / "link.db-wal").exists()
    assert first.health() == (200, {"status": "ok"})
    assert first.stop() == 0


async def test_sigterm_stops_cleanly_under_load(tmp_path: Path) -> None:
    """SIGTERM while submissions pour in: the coordinator stops listening, exits 0, its pass
    worker is gone, every submission it accepted is stored, no WAL is left to replay, and the
    next start needs nothing repaired."""
    c = Coordinator(tmp_path)
    c.start(PATIENT)
    assert c.process is not None
    c.ok("PUT", "/api/v1/workspaces/w", {})
    for i in range(4):
        token = c.ok("POST", "/api/v1/tokens", {"role": "agent", "machine": f"m{i}"})["token"]
        c.ok("PUT", f"/api/v1/machines/m{i}/report", {"report": machine_report(f"m{i}")}, token)
    accepted: list[str] = []

    async def submit(http: aiohttp.ClientSession, i: int) -> None:
        body = {
            "name": f"r{i}",
            "workspace": "w",
            "command": ["x"],
            "requested_resources": {"gpu_requests": {"count": 1}},
        }
        try:
            async with http.post(f"{c.url}/api/v1/runs", json=body) as response:
                if response.status == 201:
                    accepted.append(f"r{i}")
        except aiohttp.ClientError:
            pass  # sent after the stop began: refused, not stored

    headers = {"Authorization": f"Bearer {c.admin}"}
    async with aiohttp.ClientSession(headers=headers) as http:
        await asyncio.gather(*(submit(http, i) for i in range(40)))
        await asyncio.to_thread(until, "a first placement", lambda: _placed(c))
        before = len(accepted)
        more = [asyncio.ensure_future(submit(http, i)) for i in range(40, 120)]
        await until_async("more runs to arrive", lambda: len(accepted) > before)
        workers = await until_async("the pass worker", lambda: _children(c.process.proc.pid))
        c.process.signal(signal.SIGTERM)  # while the rest arrive and passes commit
        await asyncio.gather(*more)
    assert await asyncio.to_thread(c.process.wait) == 0
    until("the pass worker to end", lambda: not any(alive(pid) for pid in workers))
    assert not _wal(c.db).exists()
    states = invariants(c.db)
    assert sum(states.values()) >= len(accepted) > 0
    c.start(PATIENT)
    stored = c.ok("GET", "/api/v1/runs?workspace=w")["runs"]
    assert {r["name"] for r in stored} >= set(accepted)
    assert c.stop() == 0


def _wal(db: Path) -> Path:
    """What SIGKILL leaves beside the file for the next start to replay; a clean stop none."""
    return db.with_name(db.name + "-wal")


def _placed(c: Coordinator) -> bool:
    return bool(c.ok("GET", "/api/v1/runs?workspace=w&state=Running")["runs"])


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for listing in Path(f"/proc/{pid}/task").glob("*/children"):
        found.update(int(child) for child in listing.read_text().split())
    return found
