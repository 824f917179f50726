"""Input that would poison the coordinator: refused on the wire with the field named, or, when
already stored, set aside without stopping the rest of the cluster."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from helpers import until_async

from astraeus.coordinator.api.keys import REPORTING
from astraeus.coordinator.startup import private_dir
from astraeus.coordinator.store import Store
from astraeus.shared.report import MAX_GPUS

from .conftest import ClientFactory, Cluster, make_cluster
from .fakes import report

UID = "0b5c8f1e-7d2a-4c3b-9e6f-1a2b3c4d5e6f"


async def _put(c: Cluster, machine: str, raw: bytes) -> tuple[int, Any]:
    """A report's raw bytes, as a hostile agent may write them (not JSON a library would)."""
    headers = {**c.auth(c.agent_token(machine)), "Content-Type": "application/json"}
    response = await c.client.put(f"/api/v1/machines/{machine}/report", data=raw, headers=headers)
    return response.status, await response.json()


@pytest.mark.parametrize(
    ("replace", "field"),
    [
        pytest.param(b'"cpu_cores": 96', "report.cpu_cores", id="infinity"),
        pytest.param(b'"memory_bytes": 1099511627776', "report.memory_bytes", id="int-infinity"),
    ],
)
async def test_infinity_and_nan_are_refused_naming_the_field(
    fake_cluster: Cluster, replace: bytes, field: str
) -> None:
    """`1e999` (infinity) and `NaN` in a report are a 400 naming the field; nothing is stored."""
    c = fake_cluster
    raw = json.dumps({"report": report("gpu-01")}).encode()
    key = replace.split(b":")[0]
    for bad in (b"1e999", b"NaN", b"-Infinity"):
        status, data = await _put(c, "gpu-01", raw.replace(replace, key + b": " + bad))
        problem = "must be a finite number, not NaN or infinity"
        assert (status, data["fields"]) == (400, [{"field": field, "problem": problem}])
    assert c.records.get("gpu-01") is not None
    assert c.records.get("gpu-01").report is None  # type: ignore[union-attr]


async def test_an_unreadable_stored_report_sets_its_machine_aside(
    aiohttp_client: ClientFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A report stored with `cpu_cores: null` (as `1e999` once was) stops neither the start nor
    a pass: that machine is set aside with a logged reason, another takes the run, and its
    agent's next good report brings it back."""
    store = Store.open(tmp_path / "astraeus.db")
    poisoned = {**report("gpu-01"), "cpu_cores": None}
    now = "2026-10-01T09:00:00+00:00"
    with store.database.write() as conn:
        conn.execute(
            "INSERT INTO machines (name, report, last_seen, created_at) VALUES (?, ?, ?, ?)",
            ("gpu-01", json.dumps(poisoned), now, now),
        )
    store.close()
    with caplog.at_level(logging.WARNING):
        c = await make_cluster(aiohttp_client, tmp_path)
    assert "machine gpu-01 is set aside: its stored row cannot be read" in caplog.text
    await c.workspace("vision")
    await c.report("gpu-02")
    await c.submit("vision", "finetune", gpus=8)
    assert (await c.run_pass()).placed == 1
    _, task = await c.call("GET", "/api/v1/tasks/finetune-0", c.tokens["vision"])
    assert task["machine"] == "gpu-02"
    await c.report("gpu-01")
    await c.submit("vision", "second", gpus=8)
    assert (await c.run_pass()).placed == 1
    c.store.close()


async def test_a_sequence_past_what_sqlite_holds_is_a_400(fake_cluster: Cluster) -> None:
    """An update `seq` of 2**64 is a JSON 400 naming it, not a plain-text 500."""
    c = fake_cluster
    update = {"seq": 2**64, "task_uid": UID, "state": "Running", "at": c.clock.now().isoformat()}
    body = {"report": report("gpu-01"), "updates": [update]}
    status, data = await c.call(
        "PUT", "/api/v1/machines/gpu-01/report", c.agent_token("gpu-01"), body
    )
    assert (status, data["fields"]) == (
        400,
        [{"field": "updates[0].seq", "problem": f"must be at most {2**63 - 1}, got {2**64}"}],
    )


async def test_an_unexpected_failure_is_a_json_500(fake_cluster: Cluster) -> None:
    """A failure no handler expected (here the database is gone) answers the documented JSON
    error, and the coordinator's log has the traceback."""
    c = fake_cluster
    await c.workspace("vision")
    c.store.database.close()
    status, data = await c.call("GET", "/api/v1/runs", c.tokens["vision"])
    assert (status, data) == (
        500,
        {"error": "internal error: the coordinator's log has the details", "fields": []},
    )


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        pytest.param({"command": ["python", "-c", "print(1)\x00rm -rf ~"]}, "command[2]", id="cmd"),
        pytest.param({"env": {"TOKEN": "abc\x00def"}}, "env.TOKEN", id="env"),
    ],
)
async def test_a_nul_byte_that_would_reach_a_process_is_a_400(
    fake_cluster: Cluster, spec: dict[str, Any], field: str
) -> None:
    """A NUL in a run's command or env is refused naming the field: the kernel would cut the
    string there and run something else. (An image must be an OCI reference, NUL-free.)"""
    c = fake_cluster
    token = await c.workspace("vision")
    body = {"name": "nul", "command": ["python"], **spec}
    status, data = await c.call("POST", "/api/v1/runs", token, body)
    assert (status, data["fields"]) == (
        400,
        [{"field": field, "problem": "must not contain a NUL byte"}],
    )


async def test_a_report_s_lists_are_bounded(fake_cluster: Cluster) -> None:
    """More GPUs than any machine has is a 400 naming `report.gpus`, with the maximum."""
    c = fake_cluster
    body = {"report": report("gpu-01", gpus=MAX_GPUS + 1)}
    status, data = await c.call(
        "PUT", "/api/v1/machines/gpu-01/report", c.agent_token("gpu-01"), body
    )
    problem = f"must have at most {MAX_GPUS} items, got {MAX_GPUS + 1}"
    assert (status, data["fields"]) == (400, [{"field": "report.gpus", "problem": problem}])


async def test_one_report_in_flight_per_machine(fake_cluster: Cluster) -> None:
    """While a machine's report is still arriving, a second one for it is a 429 with
    Retry-After; another machine's is answered, and so is the first once it is whole."""
    c = fake_cluster
    raw = json.dumps({"report": report("gpu-01")}).encode()
    arrived = asyncio.Event()
    release = asyncio.Event()

    async def slowly() -> Any:
        yield raw[:20]
        arrived.set()
        await release.wait()
        yield raw[20:]

    token = c.agent_token("gpu-01")
    headers = {**c.auth(token), "Content-Type": "application/json"}
    first = asyncio.create_task(
        c.client.put("/api/v1/machines/gpu-01/report", data=slowly(), headers=headers)
    )
    await arrived.wait()
    await until_async(
        "the server to read the first body", lambda: "gpu-01" in c.client.app[REPORTING]
    )
    second = await c.client.put("/api/v1/machines/gpu-01/report", data=raw, headers=headers)
    assert (second.status, second.headers["Retry-After"]) == (429, "5")
    assert (await second.json())["error"] == (
        "a report for machine 'gpu-01' is already being received: send one at a time"
    )
    await c.report("gpu-02")
    release.set()
    assert (await first).status == 200


async def test_log_chunks_apply_by_offset(fake_cluster: Cluster) -> None:
    """A resent chunk changes nothing, one reaching further replaces what it overlaps, and a
    stale lower offset never writes out of order."""
    c = fake_cluster
    await c.workspace("vision")
    await c.report("gpu-01")
    await c.submit("vision", "train", gpus=1)
    await c.run_pass()
    hello = {"task": "train-0", "offset": 0, "data": "hello\n"}
    await c.report("gpu-01", logs=[hello])
    await c.report("gpu-01", logs=[hello])  # the reply was lost; the agent sends it again
    await c.report("gpu-01", logs=[{"task": "train-0", "offset": 6, "data": "world\n"}])
    await c.report("gpu-01", logs=[{"task": "train-0", "offset": 0, "data": "hel"}])  # stale
    longer = {"task": "train-0", "offset": 6, "data": "world\nagain\n"}
    await c.report("gpu-01", logs=[longer])  # resent with more written since
    _, view = await c.call("GET", "/api/v1/tasks/train-0/logs", c.tokens["vision"])
    assert (view["offset"], view["data"]) == (0, "hello\nworld\nagain\n")


def test_the_database_and_state_directory_are_private_whatever_the_umask(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With umask 000, the database, its WAL and SHM are 0600 and a new state directory 0700;
    an old world-readable database is tightened when opened; an existing directory others may
    enter is left as it is (it may be shared), with a warning."""
    old = os.umask(0)
    try:
        state = tmp_path / "state"
        private_dir(state)
        store = Store.open(state / "astraeus.db")
        store.workspaces.all()
        modes = {
            path.name: stat.S_IMODE(path.stat().st_mode)
            for path in state.iterdir()
            if path.name.startswith("astraeus.db")
        }
        store.close()
        assert modes == {"astraeus.db": 0o600, "astraeus.db-wal": 0o600, "astraeus.db-shm": 0o600}
        assert stat.S_IMODE(state.stat().st_mode) == 0o700
        os.chmod(state / "astraeus.db", 0o644)
        os.chmod(state, 0o755)  # noqa: S103 - the loose mode an old install left
        with caplog.at_level(logging.WARNING):
            private_dir(state)
        Store.open(state / "astraeus.db").close()
        assert stat.S_IMODE((state / "astraeus.db").stat().st_mode) == 0o600
        assert f"{state} is mode 755: other users may list it" in caplog.text
    finally:
        os.umask(old)


@pytest.mark.parametrize(
    "raw", ["%C2%B2", "99999999999999999999", "-1"], ids=["superscript", "2**66", "minus"]
)
async def test_a_row_id_in_a_path_that_is_no_row_is_a_404(fake_cluster: Cluster, raw: str) -> None:
    """A token or reservation id that no row can have (`²`, past 64 bits) is a JSON 404."""
    c = fake_cluster
    await c.report("gpu-01")
    for path in (f"/api/v1/tokens/{raw}", f"/api/v1/machines/gpu-01/reservations/{raw}"):
        status, data = await c.call("DELETE", path)
        assert (status, data["fields"]) == (404, []), path
    member = await c.workspace("vision")
    status, data = await c.call("GET", "/api/v1/runs?limit=%C2%B2", member)
    assert (status, data["error"]) == (400, "bad limit")
