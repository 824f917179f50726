"""`astraeus-coordinator backup` while the coordinator places a stream of runs, and a restore
done exactly as docs/operator.md says."""

from __future__ import annotations

import asyncio
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from helpers import until

from .rig import BIN, PATIENT, Coordinator, Process, invariants, machine_report

pytestmark = pytest.mark.slow  # a backup of a live coordinator under 200 submissions

RUNS = 200
SUMMARY = re.compile(
    r"backup of (?P<db>\S+) written to (?P<to>\S+): (?P<runs>\d+) runs, (?P<machines>\d+)"
    r" machines, schema (?P<schema>\d+), \d+ bytes, integrity ok\n"
)


async def test_a_backup_during_200_submissions_restores_whole(tmp_path: Path) -> None:
    """A backup taken while 200 submissions arrive and passes place them is one consistent
    state: restored (service stopped, file replaced, -wal and -shm removed) it starts, every
    run accepted before the backup began is there, and no GPU is held twice."""
    c = Coordinator(tmp_path / "live")
    c.root.mkdir()
    c.start(PATIENT)
    c.ok("PUT", "/api/v1/workspaces/w", {})
    for i in range(10):
        name = f"m{i}"
        token = c.ok("POST", "/api/v1/tokens", {"role": "agent", "machine": name})["token"]
        c.ok("PUT", f"/api/v1/machines/{name}/report", {"report": machine_report(name)}, token)
    accepted: list[str] = []
    copy = tmp_path / "backups" / "astraeus.db"
    copy.parent.mkdir()
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {c.admin}"}) as http:
        submissions = [
            asyncio.ensure_future(_submit(http, c.url, i, accepted)) for i in range(RUNS)
        ]
        await asyncio.to_thread(
            until, "50 runs in and some placed", lambda: len(accepted) >= RUNS // 4 and _placed(c)
        )
        before = set(accepted)
        backup = Process(
            [str(BIN / "astraeus-coordinator"), "backup", "--db", str(c.db), str(copy)],
            tmp_path / "backup.log",
        )
        assert await asyncio.to_thread(backup.wait) == 0
        await asyncio.gather(*submissions)
    assert len(accepted) == RUNS
    summary = SUMMARY.fullmatch(backup.output)
    assert summary is not None, backup.output
    assert (summary["db"], summary["to"], summary["machines"]) == (str(c.db), str(copy), "10")
    assert int(summary["runs"]) >= len(before)
    assert copy.stat().st_mode & 0o777 == 0o600
    assert not list(copy.parent.glob(".*partial*"))
    assert c.stop() == 0

    _restore(copy, c.db)
    restored = invariants(c.db)
    assert sum(restored.values()) == int(summary["runs"])
    assert restored["Running"] > 0  # placed runs, holding GPUs, are in the copy
    c.start(PATIENT)
    names = {r["name"] for r in c.ok("GET", "/api/v1/runs?workspace=w&limit=1000")["runs"]}
    assert names >= before
    assert len(names) == int(summary["runs"])
    assert c.health() == (200, {"status": "ok"})
    assert c.stop() == 0
    assert invariants(c.db) == restored
    with sqlite3.connect(c.db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _restore(copy: Path, db: Path) -> None:
    """As docs/operator.md has it, the service stopped: move the old file and its -wal and
    -shm aside (a -wal left beside the copy would be replayed into it), put the copy in place."""
    for suffix in ("", "-wal", "-shm"):
        old = Path(f"{db}{suffix}")
        if old.exists():
            old.rename(f"{old}.broken")
    shutil.copy2(copy, db)


def _placed(c: Coordinator) -> bool:
    return bool(c.ok("GET", "/api/v1/runs?workspace=w&state=Running")["runs"])


async def _submit(http: aiohttp.ClientSession, url: str, i: int, accepted: list[str]) -> Any:
    body = {
        "name": f"r{i}",
        "workspace": "w",
        "command": ["x"],
        "requested_resources": {"gpu_requests": {"count": 1 + i % 4}},
    }
    async with http.post(f"{url}/api/v1/runs", json=body) as response:
        assert response.status == 201, await response.text()
        accepted.append(f"r{i}")
