"""A coordinator on a real SQLite file (or a real PostgreSQL database: `store_cluster`) behind a
real aiohttp test server, with a fake clock."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pg_server
import pytest
from aiohttp.test_utils import TestClient

from astraeus.coordinator.api import RECORDS, SCHEDULER, create_app
from astraeus.coordinator.machine_records import MachineRecords
from astraeus.coordinator.scheduler import PassResult, SessionFactory
from astraeus.coordinator.settings import Settings
from astraeus.coordinator.store import Role, Store
from astraeus.shared.clock import FakeClock

from .fakes import START, FirstFitSession, report

ClientFactory = Callable[..., Any]


@dataclass
class Cluster:
    """A coordinator under test, and tokens for an admin, members and agents."""

    client: TestClient[Any, Any]
    store: Store
    clock: FakeClock
    admin: str
    tokens: dict[str, str] = field(default_factory=dict)
    seq: dict[str, int] = field(default_factory=dict)

    @property
    def records(self) -> MachineRecords:
        """The machines as the coordinator under test keeps them."""
        return self.client.app[RECORDS]

    def auth(self, token: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {token or self.admin}"}

    async def call(
        self, method: str, path: str, token: str | None = None, body: Any = None, **kw: Any
    ) -> tuple[int, Any]:
        response = await self.client.request(
            method, path, json=body, headers=self.auth(token), **kw
        )
        try:
            data = await response.json()
        except Exception:
            data = await response.text()
        return response.status, data

    async def workspace(self, name: str, **fields: Any) -> str:
        """Create a workspace and a member token for it; returns the token."""
        status, _ = await self.call("PUT", f"/api/v1/workspaces/{name}", body=fields)
        assert status in (200, 201)
        secret, _ = self.store.tokens.create(Role.MEMBER, self.clock.now(), workspace=name)
        self.tokens[name] = secret
        return secret

    def agent_token(self, machine: str) -> str:
        if machine not in self.tokens:
            self.records.ensure(machine, self.clock.now())
            secret, _ = self.store.tokens.create(Role.AGENT, self.clock.now(), machine=machine)
            self.tokens[machine] = secret
        return self.tokens[machine]

    async def report(
        self,
        machine: str,
        updates: list[dict[str, Any]] | None = None,
        logs: list[dict[str, Any]] | None = None,
        tasks: list[str] | None = None,
        busy_ports: list[dict[str, Any]] | None = None,
        ports_in_use: list[dict[str, Any]] | None = None,
        **kw: Any,
    ) -> dict[str, Any]:
        """Post a machine's report with task updates (numbered here) and, when given, the tasks
        its agent runs; returns the reply.

        An update, chunk or running task may be named by `task` (its name) for brevity: it is
        sent with the `task_uid` of the newest task of that name on the machine, as its agent
        would."""
        numbered = []
        for update in updates or []:
            self.seq[machine] = self.seq.get(machine, -1) + 1
            numbered.append(
                {
                    "seq": self.seq[machine],
                    "at": self.clock.now().isoformat(),
                    **self.by_uid(machine, update),
                }
            )
        chunks = [self.by_uid(machine, chunk) for chunk in logs or []]
        body: dict[str, Any] = {
            "report": report(machine, **kw),
            "updates": numbered,
            "logs": chunks,
        }
        if tasks is not None:
            body["tasks"] = [self.uid(machine, task) for task in tasks]
        if busy_ports is not None:
            body["busy_ports"] = busy_ports
        if ports_in_use is not None:
            body["ports_in_use"] = ports_in_use
        status, data = await self.call(
            "PUT", f"/api/v1/machines/{machine}/report", self.agent_token(machine), body
        )
        assert status == 200, data
        return data  # type: ignore[no-any-return]

    async def label(self, machine: str, **labels: str) -> None:
        """Give the machine labels as an admin (the only way to give it a pool)."""
        path = f"/api/v1/machines/{machine}/labels"
        status, data = await self.call("PUT", path, body={"labels": labels})
        assert status == 200, data

    def uid(self, machine: str, task: str) -> str:
        """The uid of the newest task named `task` on `machine`."""
        row = self.store.database.read_one(
            "SELECT uid FROM tasks WHERE machine = ? AND name = ? ORDER BY id DESC LIMIT 1",
            (machine, task),
        )
        assert row is not None, f"no task {task} on {machine}"
        return str(row["uid"])

    def by_uid(self, machine: str, item: dict[str, Any]) -> dict[str, Any]:
        """`item` with `task` (a name) replaced by that task's `task_uid`; chunks get `end`."""
        item = dict(item)
        if "task" in item and "task_uid" not in item:
            item["task_uid"] = self.uid(machine, item.pop("task"))
        if "data" in item and "end" not in item:
            item["end"] = item["offset"] + len(item["data"].encode())
        return item

    async def submit(
        self, workspace: str, name: str, gpus: int = 1, **extra: Any
    ) -> dict[str, Any]:
        spec: dict[str, Any] = {"name": name, "command": ["python", "train.py"], **extra}
        if gpus:
            spec.setdefault("requested_resources", {})["gpu_requests"] = {"count": gpus}
        status, data = await self.call("POST", "/api/v1/runs", self.tokens[workspace], spec)
        assert status == 201, data
        return data  # type: ignore[no-any-return]

    async def run_pass(self) -> PassResult:
        return await self.client.app[SCHEDULER].run_pass()


def settings_for(tmp_path: Path, database: Path | str | None = None, **changes: Any) -> Settings:
    """No load shedding unless a test asks for it (`max_report_delay_seconds`): here the test's
    client shares the coordinator's event loop, so a test's own burst of requests would count
    as the coordinator running behind. Shedding is tested in test_overload.py and, over a real
    process, in tests/faults/test_overload.py.

    Passes run in the service's own process (`pass_process=False`, a setting users have too)
    unless a test asks for the worker: each spawned worker imports the engine again, 1-2 s of
    a test that is about something else. The worker's own tests ask for it (test_one_pass.py,
    test_pass_memo.py, test_gc_policy.py), and every real coordinator (tests/faults, tests/e2e,
    tests/cli/test_demo.py) runs its passes there."""
    base = Settings(
        db=database if isinstance(database, Path) else tmp_path / "astraeus.db",
        database_url=database if isinstance(database, str) else "",
        state_dir=tmp_path,
        scheduler=False,
        max_report_delay_seconds=0,
        pass_process=False,
    )
    return replace(base, **changes)


async def make_cluster(
    aiohttp_client: ClientFactory,
    tmp_path: Path,
    session_factory: SessionFactory | None = None,
    clock: FakeClock | None = None,
    pass_pool: ProcessPoolExecutor | None = None,
    database: Path | str | None = None,
    **changes: Any,
) -> Cluster:
    if database is None and os.environ.get(pg_server.ENGINE) == "postgresql":
        database = pg_server.shared().create_database()
    settings = settings_for(tmp_path, database, **changes)
    store = Store.open(settings.database, log_cap_bytes=settings.log_cap_bytes)
    clock = clock or FakeClock(START)
    app = create_app(
        settings, store=store, clock=clock, session_factory=session_factory, pass_pool=pass_pool
    )
    client = await aiohttp_client(app)
    admin, _ = store.tokens.create(Role.ADMIN, clock.now())
    return Cluster(client=client, store=store, clock=clock, admin=admin)


@pytest.fixture
async def fake_cluster(aiohttp_client: ClientFactory, tmp_path: Path) -> AsyncIterator[Cluster]:
    """A coordinator whose placement is the first-fit fake."""
    cluster = await make_cluster(aiohttp_client, tmp_path, FirstFitSession)
    yield cluster
    cluster.store.close()


@pytest.fixture
async def store_cluster(
    aiohttp_client: ClientFactory, tmp_path: Path, database_location: Path | str
) -> AsyncIterator[Cluster]:
    """`fake_cluster` once on each engine (`database_location`): for the store's own tests."""
    made = await make_cluster(aiohttp_client, tmp_path, FirstFitSession, database=database_location)
    yield made
    made.store.close()


@pytest.fixture
async def cluster(aiohttp_client: ClientFactory, tmp_path: Path) -> AsyncIterator[Cluster]:
    """A coordinator with the real placement engine."""
    made = await make_cluster(aiohttp_client, tmp_path)
    yield made
    made.store.close()
