"""An agent given several coordinators (`--coordinator URL,URL`) reports to whichever leads:
past a refused or standby coordinator within the same report, never to an address it was not
given, waiting out a busy leader, and losing nothing it queued across a switch."""

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from cli.rig import H100, gpu_report
from cli.rig import Coordinator as RealCoordinator
from helpers import hold_port, refusing_port, until_async
from runtime_rig import TOKEN, Coordinator, Harness, assignment, machine_report, python
from standby import Standby

from astraeus.agent.runtime.client import CoordinatorClient, CoordinatorError
from astraeus.shared import AgentReport, MachineReport, TaskState

WAIT_FOR_GO = (
    "import pathlib, sys, time\n"
    "go = pathlib.Path(sys.argv[1])\n"
    "print('waiting', flush=True)\n"
    "while not go.exists():\n"
    "    time.sleep(0.02)\n"
    "print('done', flush=True)\n"
    "sys.exit(3)\n"
)
SWITCH = "coordinator: now reporting to {} (leader)"


def _body() -> AgentReport:
    return AgentReport(report=machine_report())


@contextlib.asynccontextmanager
async def _client(*urls: str) -> AsyncIterator[CoordinatorClient]:
    async with aiohttp.ClientSession() as session:
        yield CoordinatorClient(session, ",".join(urls), "gpu-01", TOKEN)


async def test_a_refused_coordinator_passes_the_report_to_the_next(
    coordinator: Coordinator,
) -> None:
    """The first coordinator refuses connections: the same report reaches the second at once."""
    with refusing_port() as port:
        async with _client(f"http://127.0.0.1:{port}", coordinator.url) as client:
            reply = await client.report(_body())
    assert (reply.acked_seq, coordinator.reports) == (-1, 1)


async def test_a_standby_sends_the_report_to_the_leader_which_is_remembered(
    coordinator: Coordinator, caplog: pytest.LogCaptureFixture
) -> None:
    """A standby names the leader: it is tried next, before the rest of the list, then first at
    every later report; the switch is one line in the log."""
    caplog.set_level(logging.INFO, "astraeus.agent.runtime.client")
    with Standby(leader=coordinator.url) as standby, Standby() as other:
        async with _client(standby.url, other.url, coordinator.url) as client:
            for _ in range(3):
                await client.report(_body())
            assert client.coordinators.leader == coordinator.url
        assert [(s.method, s.authorization) for s in standby.seen] == [("PUT", f"Bearer {TOKEN}")]
        assert other.seen == []
    assert coordinator.reports == 3
    assert [r.message for r in caplog.records] == [SWITCH.format(coordinator.url)]


async def test_a_real_leader_is_reached_past_a_standby(tmp_path: Path) -> None:
    """Against the real coordinator (its API, its store): a standby first in the list sends the
    agent's report there, and the machine is known to the coordinator from it."""
    real = RealCoordinator(tmp_path)
    real.start()
    try:
        made = real.call("POST", "/api/v1/tokens", {"role": "agent", "machine": "gpu-07"})
        report = MachineReport.model_validate(gpu_report("gpu-07", 8, H100, 80))
        with Standby(leader=real.url) as standby:
            async with aiohttp.ClientSession() as session:
                client = CoordinatorClient(
                    session, f"{standby.url},{real.url}", "gpu-07", made["token"]
                )
                await client.report(AgentReport(report=report))
                await client.report(AgentReport(report=report))
            assert len(standby.seen) == 1
        machine = real.call("GET", "/api/v1/machines/gpu-07")
    finally:
        real.stop()
    assert (machine["name"], machine["state"]) == ("gpu-07", "Up")


async def test_a_leader_not_in_the_list_is_never_contacted() -> None:
    """A standby naming an address the agent was not given: the agent's token does not go
    there; the error names the address and says it was not contacted."""
    with Standby() as unknown, Standby(leader=unknown.url) as standby:
        async with _client(standby.url) as client:
            with pytest.raises(CoordinatorError) as failed:
                await client.report(_body())
        assert unknown.seen == []
    assert str(failed.value) == (
        f"{standby.url}/api/v1/machines/gpu-01/report: a standby naming {unknown.url} as the "
        "leader, which is not one of the configured coordinators, so it was not contacted"
    )
    assert failed.value.retry_after == 1.0


async def test_when_none_leads_the_error_names_each_and_keeps_retry_after() -> None:
    """Every address tried once and why it was passed over, in one message; the standbys'
    `Retry-After` is waited before the next round."""
    with refusing_port() as port, Standby() as leaderless:
        refused = f"http://127.0.0.1:{port}"
        with Standby(leader=refused) as standby:
            async with _client(standby.url, leaderless.url, refused) as client:
                with pytest.raises(CoordinatorError) as failed:
                    await client.report(_body())
        assert len(standby.seen) == len(leaderless.seen) == 1
    message = str(failed.value)
    assert message.startswith(
        f"no coordinator took the report: {standby.url}: a standby; the leader is {refused}; "
        f"{refused}: unreachable: Cannot connect to host 127.0.0.1:{port} "
    )
    assert message.endswith(f"; {leaderless.url}: a standby; no leader is known yet")
    assert failed.value.retry_after == 1.0


async def test_a_busy_leader_is_waited_out_not_failed_over(
    aiohttp_server: Any, coordinator: Coordinator
) -> None:
    """The leader's own 503 (overloaded, its database not writable) names no leader: the agent
    waits its `Retry-After` and does not report to the next coordinator."""

    async def busy(request: web.Request) -> web.Response:
        body = {"error": "database is not writable: disk full", "fields": []}
        return web.json_response(body, status=503, headers={"Retry-After": "3"})

    app = web.Application()
    app.router.add_put("/api/v1/machines/{name}/report", busy)
    server = await aiohttp_server(app)
    leader = str(server.make_url("")).rstrip("/")
    async with _client(leader, coordinator.url) as client:
        with pytest.raises(CoordinatorError) as failed:
            await client.report(_body())
        assert client.coordinators.leader == leader
    assert (failed.value.retry_after, coordinator.arrived) == (3.0, 0)
    assert str(failed.value).startswith(f"HTTP 503 from {leader}/api/v1/machines/gpu-01/report")


async def test_nothing_queued_is_lost_across_a_switch(
    harness: Harness, coordinator: Coordinator, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The leader dies while a worker runs; its end and its last output happen while no
    coordinator answers (reports fail, the agent keeps them); once the standby's named leader
    listens, every update and every byte of the log reach it, in order, once."""
    caplog.set_level(logging.INFO, "astraeus.agent.runtime.client")
    go = tmp_path / "go"
    # Both coordinators keep their state in one database: here, the same dictionaries.
    with hold_port() as held:
        second = Coordinator(
            assignments=coordinator.assignments,
            updates=coordinator.updates,
            logs=coordinator.logs,
            port=held.getsockname()[1],
        )
        with Standby(leader=second.url) as standby:
            harness.coordinators = f"{coordinator.url},{standby.url},{second.url}"
            coordinator.assignments["t-0"] = assignment("t-0", python(WAIT_FOR_GO, str(go)))
            agent = await harness.start()
            await until_async(
                "t-0 to run and its first line to arrive",
                lambda: (
                    coordinator.log("t-0") == "waiting\n"
                    and coordinator.states("t-0")[-1:] == [TaskState.RUNNING]
                ),
            )
            await coordinator.down()
            go.write_text("go")
            await until_async("two failed reports", lambda: agent.failures >= 2)
            assert second.reports == 0
            await second.start()
            try:
                await until_async(
                    "the end and the rest of the log at the new leader",
                    lambda: (
                        coordinator.log("t-0") == "waiting\ndone\n"
                        and coordinator.states("t-0")[-1:] == [TaskState.FAILED]
                    ),
                )
                hops = len(standby.seen)
                reports = second.reports
                await until_async("two more reports", lambda: second.reports >= reports + 2)
            finally:
                await harness.halt()
                await second.down()
            assert len(standby.seen) == hops  # the leader is asked first now
    assert coordinator.states("t-0") == [TaskState.STARTING, TaskState.RUNNING, TaskState.FAILED]
    last = coordinator.last("t-0")
    assert last is not None
    assert last.exit_code == 3
    assert sum(second.batches) >= 1  # the end was delivered by the new leader
    assert agent.client.coordinators.leader == second.url
    switches = [r.message for r in caplog.records if r.message.startswith("coordinator:")]
    assert switches == [SWITCH.format(coordinator.url), SWITCH.format(second.url)]


async def test_the_agent_process_reports_past_a_standby(
    coordinator: Coordinator, tmp_path: Path
) -> None:
    """`astraeus-agent run --coordinator STANDBY,LEADER`: the real process reports to the
    leader the standby names, and says so once in its log."""
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    env = {**os.environ, "ASTRAEUS_REPORT_INTERVAL_SECONDS": "0.1"}
    with Standby(leader=coordinator.url) as standby:
        agent = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "astraeus.agent.cli", "run", "--backend", "fake:h100-sxm",
            "--coordinator", f"{standby.url},{coordinator.url}", "--token-file", str(token),
            "--name", "gpu-01", "--state-dir", str(tmp_path / "state"),
            env=env, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            await until_async("three reports at the leader", lambda: coordinator.reports >= 3)
        finally:
            agent.send_signal(signal.SIGTERM)
            _, stderr = await agent.communicate()
        assert len(standby.seen) == 1
    log = stderr.decode()
    assert agent.returncode == 0, log
    assert f"to whichever of {standby.url}, {coordinator.url} leads" in log
    assert log.count(SWITCH.format(coordinator.url)) == 1
