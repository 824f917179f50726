"""Fuzz every route of the OpenAPI document with hypothesis: no input produces a 500."""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from astraeus.coordinator.api import RECORDS, SCHEDULER, all_routes, create_app
from astraeus.coordinator.api.openapi import document
from astraeus.coordinator.machine_records import MachineRecords
from astraeus.coordinator.settings import Settings
from astraeus.coordinator.store import Role, Store
from astraeus.shared.admin import WorkspaceSpec
from astraeus.shared.clock import FakeClock

from .fakes import START, report

UID = "0b5c8f1e-7d2a-4c3b-9e6f-1a2b3c4d5e6f"

EXAMPLES: dict[str, dict[str, Any]] = {
    "RunSpec": {
        "name": "finetune",
        "command": ["python", "x.py"],
        "requested_resources": {
            "gpu_requests": {"count": 8, "models": ["H100"], "min_per_machine": 8},
            "per_gpu": {"cpu_cores": 12, "memory_bytes": 128849018880},
            "topology": {"keep_within": "rack", "patience_seconds": 1800},
        },
    },
    "AgentReport": {
        "report": report("gpu-01"),
        "updates": [
            {"seq": 1, "task_uid": UID, "state": "Running", "at": "2026-10-01T09:00:00+00:00"}
        ],
        "logs": [{"task_uid": UID, "offset": 0, "end": 1, "data": "x"}],
    },
    "CordonBody": {"reason": "firmware update"},
    "LabelsBody": {"labels": {"pool": "h100"}},
    "ReservationSpec": {
        "workspace": "vision",
        "starts_at": "2026-10-01T09:00:00+00:00",
        "ends_at": "2026-10-02T09:00:00+00:00",
    },
    "WorkspaceBody": {"pools": ["h100"], "gpu_quota": 16, "max_priority": 10},
    "TokenBody": {"role": "member", "workspace": "vision"},
}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


def _set(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = json.loads(json.dumps(value))
    target = copy
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = new
    return copy


@st.composite
def bodies(draw: st.DrawFn, model: str | None) -> Any:
    """A body: random JSON, or the model's example with one part replaced or one key added."""
    example = EXAMPLES.get(model or "", {})
    kind = draw(st.sampled_from(["random", "replace", "extra", "valid"]))
    if kind == "random" or not example:
        return draw(json_values)
    if kind == "valid":
        return example
    path = draw(st.sampled_from(list(_paths(example))))
    if kind == "replace":
        return _set(example, path, draw(json_values))
    return (
        _set(example, (*path, draw(st.text(max_size=8))), draw(json_values))
        if path and isinstance(_get(example, path), dict)
        else example
    )


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        value = value[key]
    return value


class Server:
    """The app on a real loopback port, served from a thread so hypothesis can stay synchronous."""

    def __init__(self, tmp: Path) -> None:
        self.store = Store.open(tmp / "fuzz.db")
        clock = FakeClock(START)
        self.tokens = {
            "admin": self.store.tokens.create(Role.ADMIN, clock.now())[0],
            "agent": self.store.tokens.create(Role.AGENT, clock.now(), machine="gpu-01")[0],
            "hostile": self.store.tokens.create(Role.AGENT, clock.now(), machine="evil")[0],
        }
        self.settings = replace(Settings(db=tmp / "fuzz.db", state_dir=tmp), scheduler=False)
        self.app = create_app(self.settings, store=self.store, clock=clock)
        self.loop = asyncio.new_event_loop()
        self.port = 0
        ready = threading.Event()
        self.thread = threading.Thread(target=self._serve, args=(ready,), daemon=True)
        self.thread.start()
        ready.wait(10)

    def _serve(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        runner = web.AppRunner(self.app)
        self.loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.port = runner.addresses[0][1]
        self.runner = runner
        ready.set()
        self.loop.run_forever()
        self.loop.run_until_complete(runner.cleanup())

    def request(self, method: str, path: str, token: str, body: bytes | None) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        data = response.read()
        conn.close()
        return response.status, data

    def run_pass(self) -> int:
        """One scheduler pass on the server's loop; how many runs it placed."""
        done = asyncio.run_coroutine_threadsafe(self.app[SCHEDULER].run_pass(), self.loop)
        return done.result(30).placed

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.store.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = Server(tmp_path_factory.mktemp("fuzz"))
    admin = running.tokens["admin"]
    running.request("PUT", "/api/v1/workspaces/vision", admin, b'{"pools": []}')
    _status, data = running.request(
        "POST", "/api/v1/tokens", admin, b'{"role": "member", "workspace": "vision"}'
    )
    running.tokens["member"] = json.loads(data)["token"]
    body = json.dumps({"report": report("gpu-01")}).encode()
    running.request("PUT", "/api/v1/machines/gpu-01/report", running.tokens["agent"], body)
    spec = json.dumps(EXAMPLES["RunSpec"]).encode()
    running.request("POST", "/api/v1/runs", running.tokens["member"], spec)
    yield running
    running.close()


ROUTES = document(all_routes(), "test")["paths"]
OPERATIONS = [(path, method, op) for path, ops in ROUTES.items() for method, op in ops.items()]
names = st.sampled_from(["finetune", "finetune-0", "gpu-01", "vision", "1", "nope"]) | st.text(
    alphabet=st.characters(codec="ascii", exclude_characters="/?#%"), min_size=1, max_size=12
)


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, str, Any, str]:
    path, method, op = draw(st.sampled_from(OPERATIONS))
    for param in op["parameters"]:
        if param["in"] == "path":
            value = draw(names).replace(" ", "-")
            path = path.replace("{" + param["name"] + "}", quote(value, safe=""))
    query = [
        f"{p['name']}={quote(draw(names) if p['name'] != 'dry_run' else 'true')}"
        for p in op["parameters"]
        if p["in"] == "query" and draw(st.booleans())
    ]
    if query:
        path += "?" + "&".join(query)
    body_ref = op.get("requestBody", {}).get("content", {}).get("application/json", {})
    model = body_ref.get("schema", {}).get("$ref", "").rsplit("/", 1)[-1] or None
    body = draw(bodies(model)) if method in ("post", "put") else None
    who = draw(st.sampled_from(["admin", "admin", "member", "member", "agent", ""]))
    return method.upper(), path, who, body, model or ""


@pytest.mark.slow
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_no_input_produces_a_500(server: Server, request: tuple[str, str, str, Any, str]) -> None:
    """Whatever the route, token, path, query or body, the answer is never a 5xx, and every
    error body is JSON naming the problem."""
    method, path, who, body, _ = request
    raw = json.dumps(body, allow_nan=True).encode() if body is not None else None
    status, data = server.request(method, path, server.tokens.get(who, ""), raw)
    assert status < 500, (status, data[:500])
    if status >= 400:
        assert set(json.loads(data)) == {"error", "fields"}


def test_openapi_document_lists_every_route(server: Server) -> None:
    """The served OpenAPI document has one operation per route, each with its responses."""
    status, data = server.request("GET", "/api/v1/openapi.json", server.tokens["member"], None)
    served = json.loads(data)
    assert status == 200
    assert served["openapi"] == "3.1.0"
    operations = {(p, m) for p, ops in served["paths"].items() for m in ops}
    assert operations == {(r.path, r.method.lower()) for r in all_routes()}
    assert "RunSpec" in served["components"]["schemas"]
    assert "PendingExplanation" in served["components"]["schemas"]


HOSTILE = st.sampled_from(
    [
        float("inf"),
        float("-inf"),
        float("nan"),
        2**63,
        2**64,
        -(2**63) - 1,
        10**400,
        1e308,
        -1,
        "\x00",
        "x" * 5000,
        "GPU-\x00-0",
        {"pool": "vault"},
        [None] * 300,
        True,
        None,
    ]
)
"""What an attacker's agent puts in a field: non-finite numbers, integers SQLite cannot hold,
NUL bytes, long strings, a pool it has no right to, lists past every maximum, wrong types."""


@st.composite
def hostile_reports(draw: st.DrawFn) -> bytes:
    """The valid report (gpu `evil`, with an update and a log chunk) with hostile values in some
    fields, or with one of its lists made longer than any machine's."""
    body = json.loads(json.dumps(EXAMPLES["AgentReport"]))
    body["report"] = report("evil")
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from([p for p in _paths(body) if p]))
        body = _set(body, path, draw(HOSTILE | json_values))
    if draw(st.booleans()) and isinstance(body.get("report"), dict):
        key = draw(st.sampled_from(["gpus", "rdma_ports", "drives", "labels", "capabilities"]))
        count = draw(st.sampled_from([257, 1025, 5000]))
        many: Any = {f"k{i}": "v" for i in range(count)} if key == "labels" else [{}] * count
        body = _set(body, ("report", key), many)
    updates = body.get("updates")
    if draw(st.booleans()) and isinstance(updates, list) and updates:
        body["updates"] = [updates[0]] * draw(st.sampled_from([2, 1001]))
    return json.dumps(body, allow_nan=True).encode()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_reports())
def test_hostile_reports_never_produce_a_500(server: Server, raw: bytes) -> None:
    """Whatever an agent puts in its report, the answer is a 2xx or a JSON 4xx, never a 5xx."""
    status, data = server.request(
        "PUT", "/api/v1/machines/evil/report", server.tokens["hostile"], raw
    )
    assert status < 500, (status, data[:500])
    if status >= 400:
        assert set(json.loads(data)) == {"error", "fields"}


def test_after_hostile_reports_runs_are_still_placed(server: Server, tmp_path: Path) -> None:
    """After the hostile reports (this module's earlier tests), passes still place runs, and a
    coordinator restarted on the same file reads every machine back."""
    valid = json.dumps({"report": report("evil")}).encode()
    # A token of its own: the route fuzzing may have revoked `hostile` (or any other).
    hostile, _ = server.store.tokens.create(Role.AGENT, START, machine="evil")
    for good, bad in (
        (b'"cpu_cores": 96', b'"cpu_cores": 1e999'),
        (b'"cpu_cores": 96', b'"cpu_cores": NaN'),
        (b'"memory_bytes": 1099511627776', b'"memory_bytes": 1e999'),
    ):
        body = valid.replace(good, bad)
        assert body != valid
        assert server.request("PUT", "/api/v1/machines/evil/report", hostile, body)[0] == 400
    assert server.request("PUT", "/api/v1/machines/evil/report", hostile, valid)[0] == 200
    # A workspace and member token of its own: the route fuzzing may have changed `vision`.
    now = START
    server.store.workspaces.put(WorkspaceSpec(name="after"), now)
    member, _ = server.store.tokens.create(Role.MEMBER, now, workspace="after")
    ask = {"gpu_requests": {"count": 1}, "node_selection": {"names": ["evil"]}}
    spec = json.dumps({"name": "after-fuzz", "command": ["x"], "requested_resources": ask})
    assert server.request("POST", "/api/v1/runs", member, spec.encode())[0] == 201
    assert server.run_pass() >= 1
    status, data = server.request("GET", "/api/v1/runs/after-fuzz", member, None)
    assert (status, json.loads(data)["reason"], json.loads(data)["state"]) == (200, None, "Running")
    again = Store.open(server.settings.db)
    try:
        read = {r.name: r.report is not None for r in MachineRecords(again).all()}
        # The route fuzzing may have forgotten gpu-01 (`POST /api/v1/machines/{name}/forget`).
        kept = {"gpu-01": True} if server.app[RECORDS].get("gpu-01") is not None else {}
        assert read == {**kept, "evil": True}
    finally:
        again.close()
