"""The pieces of reporting: backoff, the outbox, log chunks and the coordinator client."""

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from helpers import refusing_port, until_async
from runtime_rig import TOKEN, Coordinator, Harness, assignment, machine_report, uid_of

from astraeus.agent.runtime import Outbox, Runner, RunnerConfig, StateDir
from astraeus.agent.runtime.client import CoordinatorClient, CoordinatorError
from astraeus.agent.runtime.launch import ProcessLauncher
from astraeus.agent.runtime.logs import next_chunk
from astraeus.agent.runtime.loop import backoff_delay, retry_delay
from astraeus.agent.runtime.runner import signal_name
from astraeus.agent.runtime.state import TaskRecord
from astraeus.shared import AgentReport, TaskState
from astraeus.shared.assignment import MAX_UPDATES

AT = datetime(2026, 1, 1, tzinfo=UTC)
T0, T1 = uid_of("t-0"), uid_of("t-1")


@pytest.mark.parametrize(
    ("failures", "rng", "delay"),
    [
        pytest.param(1, 1.0, 1.0, id="first-full"),
        pytest.param(1, 0.0, 0.5, id="first-half"),
        pytest.param(4, 1.0, 8.0, id="doubles"),
        pytest.param(10, 1.0, 60.0, id="capped"),
        pytest.param(10, 0.0, 30.0, id="capped-half"),
        pytest.param(10_000, 0.5, 45.0, id="no-overflow"),
    ],
)
def test_backoff_delay(failures: int, rng: float, delay: float) -> None:
    """Delays double from 1 s to the 60 s cap, less a random part of up to half."""
    assert backoff_delay(failures, 1.0, 60.0, lambda: rng) == delay


@pytest.mark.parametrize(
    ("asked", "rng", "delay"),
    [
        pytest.param(2.0, 0.0, 2.0, id="as-asked"),
        pytest.param(2.0, 1.0, 3.0, id="plus-half"),
        pytest.param(3600.0, 0.0, 60.0, id="capped"),
        pytest.param(3600.0, 1.0, 90.0, id="capped-plus-half"),
    ],
)
def test_retry_delay(asked: float, rng: float, delay: float) -> None:
    """Retry-After is waited in full (up to 60 s), plus up to half of it at random."""
    assert retry_delay(asked, lambda: rng) == delay


async def test_client_passes_on_retry_after(aiohttp_server: Any) -> None:
    """A 503 with Retry-After (an overloaded coordinator) becomes a CoordinatorError that says
    how long to wait; one without it says nothing."""
    answers = [{"Retry-After": "3"}, {}, {"Retry-After": "Wed, 21 Oct 2026 07:28:00 GMT"}]

    async def busy(request: web.Request) -> web.Response:
        return web.json_response({"error": "overloaded"}, status=503, headers=answers.pop(0))

    app = web.Application()
    app.router.add_put("/api/v1/machines/{name}/report", busy)
    server = await aiohttp_server(app)
    found = []
    async with aiohttp.ClientSession() as session:
        client = CoordinatorClient(session, str(server.make_url("")), "gpu-01", TOKEN)
        for _ in range(3):
            with pytest.raises(CoordinatorError) as caught:
                await client.report(_body())
            assert "HTTP 503" in str(caught.value)
            found.append(caught.value.retry_after)
    assert found == [3.0, None, None]


async def test_the_agent_waits_what_retry_after_says(harness: Harness) -> None:
    """A refused report with Retry-After is tried again no sooner than asked (plus jitter),
    even past the agent's backoff cap; without it the agent backs off as usual."""
    agent = harness.build()
    agent.rng = lambda: 1.0
    refusals = [CoordinatorError("HTTP 503", retry_after=3.0), CoordinatorError("HTTP 503")]

    async def refuse(_body: AgentReport) -> Any:
        raise refusals.pop(0)

    agent.client.report = refuse  # type: ignore[method-assign]
    # 3 s plus half of it: not the 0.1 s backoff, nor its 0.4 s cap.
    assert await agent._report_or_back_off() == pytest.approx(4.5)
    # The second failure in a row, without Retry-After: 0.1 s doubled.
    assert await agent._report_or_back_off() == pytest.approx(0.2)


def test_outbox_keeps_updates_until_acknowledged(tmp_path: Path) -> None:
    """Updates are numbered, survive a restart, and leave only when acknowledged."""
    path = tmp_path / "outbox.json"
    outbox = Outbox(path)
    outbox.add(T0, TaskState.STARTING, AT)
    outbox.add(T0, TaskState.RUNNING, AT)
    outbox.add(T0, TaskState.FAILED, AT, exit_code=3, message="exited with code 3")
    outbox.ack(0)
    again = Outbox(path)
    assert [(u.seq, u.state) for u in again.pending] == [
        (1, TaskState.RUNNING),
        (2, TaskState.FAILED),
    ]
    assert again.add(T1, TaskState.STARTING, AT).seq == 3


def test_outbox_renumbers_when_the_coordinator_is_ahead(tmp_path: Path) -> None:
    """After the state directory was wiped, an `acked_seq` at or past the agent's own numbering
    renumbers the pending updates from `acked_seq + 1` (kept, in order, on disk) instead of
    dropping them; the next acknowledgement then removes them as usual."""
    path = tmp_path / "outbox.json"
    outbox = Outbox(path)
    outbox.add(T0, TaskState.STARTING, AT)
    outbox.add(T0, TaskState.FAILED, AT, exit_code=3, message="exited with code 3")
    outbox.ack(57)
    again = Outbox(path)
    assert [(u.seq, u.task_uid, u.state, u.exit_code) for u in again.pending] == [
        (58, T0, TaskState.STARTING, None),
        (59, T0, TaskState.FAILED, 3),
    ]
    assert again.next_seq == 60
    assert again.add(T1, TaskState.STARTING, AT).seq == 60
    again.ack(59)
    assert [(u.seq, u.task_uid) for u in again.pending] == [(60, T1)]


@pytest.mark.parametrize(
    ("acked", "left"),
    [
        pytest.param(-1, [0, 1], id="none-acked"),
        pytest.param(0, [1], id="first-acked"),
        pytest.param(1, [], id="all-acked"),
        pytest.param(2, [3, 4], id="ahead-by-one"),
    ],
)
def test_outbox_ack_table(tmp_path: Path, acked: int, left: list[int]) -> None:
    """Acknowledging up to `next_seq - 1` drops what it covers; from `next_seq` on it
    renumbers everything pending instead."""
    outbox = Outbox(tmp_path / "outbox.json")
    outbox.add(T0, TaskState.STARTING, AT)
    outbox.add(T0, TaskState.RUNNING, AT)
    outbox.ack(acked)
    assert [u.seq for u in outbox.pending] == left


def test_log_chunk_waits_for_a_cut_character(tmp_path: Path) -> None:
    """A character cut by the chunk limit is held back whole for the next chunk."""
    log = tmp_path / "output.log"
    log.write_bytes("ab€cd".encode())  # € is 3 bytes, at offsets 2-4
    first = next_chunk(T0, log, 0, final=False, limit=3)
    assert first is not None
    assert (first[0].data, first[1]) == ("ab", 2)
    second = next_chunk(T0, log, 2, final=False, limit=10)
    assert second is not None
    assert (second[0].offset, second[0].data, second[1]) == (2, "€cd", 7)
    assert next_chunk(T0, log, 7, final=False) is None


def test_log_chunk_of_an_ended_task_flushes_invalid_bytes(tmp_path: Path) -> None:
    """At the end of an ended task's log, a broken character becomes U+FFFD instead of waiting."""
    log = tmp_path / "output.log"
    log.write_bytes(b"ok\xe2\x82")
    assert next_chunk(T0, log, 0, final=False) is not None
    chunk = next_chunk(T0, log, 0, final=True)
    assert chunk is not None
    assert (chunk[0].data, chunk[1]) == ("ok\ufffd", 4)


def test_missing_log_has_no_chunk(tmp_path: Path) -> None:
    """A task that never started has no log and no chunk."""
    assert next_chunk(T0, tmp_path / "none.log", 0, final=True) is None


def _body() -> AgentReport:
    return AgentReport(report=machine_report())


async def test_client_gets_the_reply(coordinator: Coordinator) -> None:
    """A report returns the coordinator's reply, with the token on the request."""
    async with aiohttp.ClientSession() as session:
        client = CoordinatorClient(session, coordinator.url + "/", "gpu-01", TOKEN)
        reply = await client.report(_body())
    assert (reply.acked_seq, reply.assignments, coordinator.reports) == (-1, [], 1)


async def test_client_names_a_refused_token(coordinator: Coordinator) -> None:
    """A 401 becomes a CoordinatorError with the status and the coordinator's words."""
    async with aiohttp.ClientSession() as session:
        client = CoordinatorClient(session, coordinator.url, "gpu-01", "wrong")
        with pytest.raises(CoordinatorError) as caught:
            await client.report(_body())
    assert str(caught.value).startswith(
        f"HTTP 401 from {coordinator.url}/api/v1/machines/gpu-01/report: "
    )
    assert str(caught.value).endswith('The coordinator said: {"error": "bad token"}')


async def test_client_unreachable() -> None:
    """A refused connection becomes a CoordinatorError naming the URL."""
    with refusing_port() as port:
        url = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession() as session:
            client = CoordinatorClient(session, url, "gpu-01", TOKEN)
            with pytest.raises(CoordinatorError) as caught:
                await client.report(_body())
    assert str(caught.value).startswith(f"{url}/api/v1/machines/gpu-01/report unreachable: ")


async def test_client_rejects_a_reply_that_is_not_one(aiohttp_server: Any) -> None:
    """A 200 whose body is not a ReportReply is an error, not a crash."""

    async def bad(request: web.Request) -> web.Response:
        return web.json_response({"acked_seq": "many"})

    app = web.Application()
    app.router.add_put("/api/v1/machines/{name}/report", bad)
    server = await aiohttp_server(app)
    async with aiohttp.ClientSession() as session:
        client = CoordinatorClient(session, str(server.make_url("")), "gpu-01", TOKEN)
        with pytest.raises(CoordinatorError) as caught:
            await client.report(_body())
    assert "is not a ReportReply" in str(caught.value)
    assert "acked_seq" in str(caught.value)


@pytest.mark.parametrize(
    ("number", "name"),
    [
        pytest.param(11, "SIGSEGV", id="named"),
        pytest.param(40, "40", id="real-time"),
    ],
)
def test_signal_name(number: int, name: str) -> None:
    """Signals are named as Linux names them; one without a name keeps its number."""
    assert signal_name(number) == name


def test_one_report_carries_at_most_4_mib_of_logs(tmp_path: Path) -> None:
    """256 KiB per task and 4 MiB per report; the rest waits for the next report."""
    state = StateDir(tmp_path)
    for i in range(20):
        record = TaskRecord(assignment=assignment(f"t-{i}", ["x"]), state=TaskState.SUCCEEDED)
        state.save(record)
        state.path(record, "output.log").write_bytes(b"x" * 300 * 1024)
    runner = Runner(state, Outbox(tmp_path / "outbox.json"), ProcessLauncher(), RunnerConfig())
    chunks = runner.log_chunks()
    assert [len(c.data) for c in chunks] == [256 * 1024] * 16
    runner.logs_received()
    second = [len(c.data) for c in runner.log_chunks()]
    assert second == [44 * 1024] * 16 + [256 * 1024] * 4


async def test_a_long_outbox_goes_out_in_reports_of_at_most_1000(
    harness: Harness, coordinator: Coordinator
) -> None:
    """1,500 unacknowledged updates (a long outage) go in two reports back to back: the first
    1,000, then the rest, each within what the coordinator accepts."""
    harness.state_dir.mkdir(parents=True)
    at = AT.isoformat()
    pending = [{"seq": n, "task_uid": T0, "state": "Running", "at": at} for n in range(1500)]
    (harness.state_dir / "outbox.json").write_text(
        json.dumps({"next_seq": 1500, "pending": pending})
    )
    await harness.start()
    await until_async("every update to arrive", lambda: len(coordinator.updates) == 1500)
    assert coordinator.batches[:2] == [MAX_UPDATES, 500]
