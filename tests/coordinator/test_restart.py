"""A real coordinator process killed with SIGKILL mid-pass, then restarted on the same file."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from helpers import until_async

from astraeus.coordinator.store import Store

from .fakes import report
from .test_concurrency import assert_no_gpu_held_twice

BIN = Path(sys.executable).parent / "astraeus-coordinator"
MACHINES = 20
RUNS = 200


DEADLINE_SECONDS = 30.0
"""How long any wait here may take before the test fails, saying what it waited for."""
LISTENING = "astraeus-coordinator: listening on "


class Coordinator:
    """A coordinator subprocess on a port it chose, and an HTTP session to it."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.base = ""
        self.process: asyncio.subprocess.Process | None = None
        self.http = aiohttp.ClientSession()
        self.admin = ""
        self.drain: asyncio.Future[None] | None = None

    async def start(self) -> None:
        """Start on port 0 and read back the address it says it listens on: ready, and where."""
        self.process = await asyncio.create_subprocess_exec(
            BIN,
            "--db",
            self.tmp / "astraeus.db",
            "--state-dir",
            self.tmp,
            "--listen",
            "127.0.0.1:0",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        self.base = await asyncio.wait_for(self._listening(), DEADLINE_SECONDS)
        self.admin = (self.tmp / "admin.token").read_text().strip()

    async def _listening(self) -> str:
        assert self.process is not None
        assert self.process.stderr is not None
        async for line in self.process.stderr:
            text = line.decode().strip()
            if text.startswith(LISTENING):
                # Nobody reads stderr from here on: drop it, so the coordinator never blocks.
                self.drain = asyncio.ensure_future(self._drain(self.process.stderr))
                return text.removeprefix(LISTENING)
        pytest.fail(f"the coordinator exited with {await self.process.wait()} before listening")

    @staticmethod
    async def _drain(stream: asyncio.StreamReader) -> None:
        while await stream.read(65536):
            pass

    @property
    def _base(self) -> str:
        return self.base

    async def call(self, method: str, path: str, body: Any = None, token: str = "") -> Any:
        headers = {"Authorization": f"Bearer {token or self.admin}"}
        async with self.http.request(method, self._base + path, json=body, headers=headers) as r:
            assert r.status < 300, await r.text()
            return await r.json()

    def children(self) -> set[int]:
        """The coordinator's child processes (its pass worker, multiprocessing's tracker)."""
        assert self.process is not None
        found: set[int] = set()
        for listing in Path(f"/proc/{self.process.pid}/task").glob("*/children"):
            found.update(int(pid) for pid in listing.read_text().split())
        return found

    async def kill(self) -> set[int]:
        """SIGKILL the coordinator; returns the children it had."""
        assert self.process is not None
        children = self.children()
        os.kill(self.process.pid, signal.SIGKILL)
        await self.process.wait()
        return children


@asynccontextmanager
async def coordinator(tmp: Path) -> AsyncIterator[Coordinator]:
    running = Coordinator(tmp)
    try:
        yield running
    finally:
        if running.process is not None and running.process.returncode is None:
            await running.kill()
        await running.http.close()


async def _report_all(c: Coordinator, agents: dict[str, str]) -> None:
    await asyncio.gather(
        *(
            c.call("PUT", f"/api/v1/machines/{name}/report", {"report": report(name)}, token)
            for name, token in agents.items()
        )
    )


def _alive(pids: set[int]) -> bool:
    return any(Path(f"/proc/{pid}").exists() for pid in pids)


async def _pending(c: Coordinator, member: str) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = (await c.call("GET", "/api/v1/runs?state=Pending", token=member))[
        "runs"
    ]
    return runs


def _clocks(store: Store) -> dict[str, str]:
    rows = store.database.read("SELECT name, first_evaluated_at FROM runs WHERE state = 'Pending'")
    return {row["name"]: row["first_evaluated_at"] for row in rows if row["first_evaluated_at"]}


@pytest.mark.slow  # 200 runs over 20 machines through a SIGKILL and a restart
async def test_sigkill_mid_pass_loses_nothing(tmp_path: Path) -> None:
    """Killed with SIGKILL while passes commit: its pass worker exits too, and after a restart
    every run is still there, no GPU is held twice, pending runs get placed, and patience clocks
    keep their start."""
    async with coordinator(tmp_path) as c:
        await c.start()
        assert oct((tmp_path / "admin.token").stat().st_mode & 0o777) == "0o600"
        await c.call("PUT", "/api/v1/workspaces/vision", {})
        member = (
            await c.call("POST", "/api/v1/tokens", {"role": "member", "workspace": "vision"})
        )["token"]
        agents = {}
        for i in range(MACHINES):
            name = f"gpu-{i:02}"
            new = await c.call("POST", "/api/v1/tokens", {"role": "agent", "machine": name})
            agents[name] = new["token"]
        await _report_all(c, agents)
        submissions = [
            c.call(
                "POST",
                "/api/v1/runs",
                {
                    "name": f"run-{i}",
                    "command": ["x"],
                    "requested_resources": {"gpu_requests": {"count": 1 + i % 4}},
                },
                member,
            )
            for i in range(RUNS)
        ]
        await asyncio.gather(*submissions[: RUNS // 2])

        async def explained() -> bool:
            return any(r["reason"] for r in await _pending(c, member))

        await until_async("a first pass to commit", explained)
        # Kill while the second half arrives and each arrival triggers passes: once the first
        # of them is answered, arrivals are being taken and passes triggered.
        tasks = [asyncio.ensure_future(s) for s in submissions[RUNS // 2 :]]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        assert not all(t.done() for t in tasks)  # some still arriving at the kill
        orphans = await c.kill()
        accepted = sum(
            1
            for t in await asyncio.gather(*tasks, return_exceptions=True)
            if not isinstance(t, BaseException)
        )

        assert orphans  # the pass worker was running

        async def orphans_gone() -> bool:
            return not _alive(orphans)

        await until_async("the pass worker to notice its parent is gone", orphans_gone)

        store = Store.open(tmp_path / "astraeus.db")
        stored = sum(store.runs.counts_by_state().values())
        assert stored >= RUNS // 2 + accepted  # every answered submission survived
        assert_no_gpu_held_twice(store)
        clocks = _clocks(store)
        store.close()

        assert clocks  # some runs were waiting, with their patience clock started

        await c.start()
        # The agents come back and say every task they were given has ended.
        for name, token in agents.items():
            body = {"report": report(name)}
            reply = await c.call("PUT", f"/api/v1/machines/{name}/report", body, token)
            ended = [
                {
                    "seq": n,
                    "task_uid": a["task_uid"],
                    "state": "Succeeded",
                    "exit_code": 0,
                    "at": "2026-10-01T09:00:00+00:00",
                }
                for n, a in enumerate(reply["assignments"])
            ]
            await c.call(
                "PUT", f"/api/v1/machines/{name}/report", {**body, "updates": ended}, token
            )

        async def placing_again() -> bool:
            pending = await _pending(c, member)
            return not set(clocks) <= {run["name"] for run in pending}

        await until_async("runs that waited before the kill to be placed again", placing_again)
        store = Store.open(tmp_path / "astraeus.db")
        assert sum(store.runs.counts_by_state().values()) == stored
        assert assert_no_gpu_held_twice(store) > 0
        after = _clocks(store)
        still = [name for name in clocks if name in after]
        assert len(still) < len(clocks)
        assert {name: after[name] for name in still} == {name: clocks[name] for name in still}
        store.close()
