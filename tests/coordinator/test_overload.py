"""Load shedding inside one coordinator: a report that would wait behind a busy writer thread
is refused at once (503, Retry-After), its machine still heard; the event loop measures its own
delay. The whole process under a storm of reports is in tests/faults/test_overload.py."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from astraeus.coordinator.api.overload import LoopDelay

from .conftest import ClientFactory, Cluster, make_cluster
from .fakes import FirstFitSession, report


@pytest.fixture
async def strict(aiohttp_client: ClientFactory, tmp_path: Path) -> AsyncIterator[Cluster]:
    """A coordinator that sheds a report waiting more than 0.5 s."""
    made = await make_cluster(
        aiohttp_client, tmp_path, FirstFitSession, max_report_delay_seconds=0.5
    )
    yield made
    made.store.close()


@pytest.fixture
async def patient(aiohttp_client: ClientFactory, tmp_path: Path) -> AsyncIterator[Cluster]:
    """A coordinator that never sheds (`max_report_delay_seconds = 0`)."""
    made = await make_cluster(
        aiohttp_client, tmp_path, FirstFitSession, max_report_delay_seconds=0.0
    )
    yield made
    made.store.close()


def _block_writer(c: Cluster) -> threading.Event:
    """Keep the writer thread busy until the returned event is set."""
    gate = threading.Event()
    c.store.database.writer.submit(lambda: gate.wait(30))
    return gate


async def _running_task(c: Cluster) -> dict[str, object]:
    """A placed task on gpu-01 and the body of a report saying it runs."""
    await c.workspace("vision")
    await c.report("gpu-01")
    await c.submit("vision", "finetune", gpus=8)
    await c.run_pass()
    uid = c.uid("gpu-01", "finetune-0")
    at = c.clock.now().isoformat()
    return {
        "report": report("gpu-01"),
        "updates": [{"seq": 0, "task_uid": uid, "state": "Running", "at": at}],
    }


async def test_a_report_behind_a_busy_writer_is_shed_and_heard(strict: Cluster) -> None:
    """While the writer thread is 0.5 s behind, a report that must write is answered 503 with
    Retry-After at once, nothing of it stored or acknowledged; its machine's last-seen time
    moves all the same, and the metrics count it. Once the writer catches up the same report
    is taken."""
    c = strict
    body = await _running_task(c)
    gate = _block_writer(c)
    try:
        await asyncio.sleep(0.7)
        c.clock.advance(20)
        token = c.agent_token("gpu-01")
        response = await c.client.put(
            "/api/v1/machines/gpu-01/report", json=body, headers=c.auth(token)
        )
        error = await response.json()
    finally:
        gate.set()
    assert response.status == 503
    assert error["error"].startswith("the coordinator is overloaded (the database writer ")
    # Twice the 5 s report interval, at most a third of the 30 s Down window.
    assert response.headers["Retry-After"] == "10"
    record = c.records.get("gpu-01")
    assert record is not None
    assert (record.last_seen, record.acked_seq) == (c.clock.now(), -1)
    _, task = await c.call("GET", "/api/v1/tasks/finetune-0", c.tokens["vision"])
    assert task["state"] == "Assigned"
    _, metrics = await c.call("GET", "/metrics")
    assert '\nastraeus_reports_shed_total{queue="writer"} 1\n' in metrics
    await c.store.database.run(lambda: None)  # the writer has caught up
    status, reply = await c.call("PUT", "/api/v1/machines/gpu-01/report", token, body)
    assert (status, reply["acked_seq"]) == (200, 0)


async def test_without_a_limit_a_report_waits_for_the_writer(patient: Cluster) -> None:
    """`max_report_delay_seconds = 0`: nothing is shed; the report waits its turn."""
    c = patient
    body = await _running_task(c)
    gate = _block_writer(c)
    token = c.agent_token("gpu-01")
    sent = asyncio.create_task(c.call("PUT", "/api/v1/machines/gpu-01/report", token, body))
    await asyncio.sleep(0.3)
    assert not sent.done()
    gate.set()
    status, reply = await sent
    assert (status, reply["acked_seq"]) == (200, 0)


async def test_the_loop_delay_is_how_long_the_loop_was_busy() -> None:
    """A loop blocked for 0.3 s is found at least 0.2 s behind, right after."""
    meter = LoopDelay()
    ticking = asyncio.create_task(meter.run())
    try:
        await asyncio.sleep(0.01)
        time.sleep(0.3)  # noqa: ASYNC251 - the point: the loop is blocked
        assert meter.seconds() >= 0.2
    finally:
        ticking.cancel()
