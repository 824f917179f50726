"""Issue 30: an agent set up wrong says, in one sentence, which of its settings to fix (its CA,
its URL's scheme, its token), and backs off further than for an outage instead of repeating
Python's words every few seconds."""

import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from helpers import refusing_port
from release.rig import OPENSSL, make_ca, make_server_cert
from runtime_rig import TOKEN, Coordinator, Harness, machine_report

from astraeus.agent.runtime.client import CoordinatorClient, CoordinatorError
from astraeus.shared import AgentReport


def _body() -> AgentReport:
    return AgentReport(report=machine_report())


@pytest.fixture
async def tls_server(tmp_path: Path) -> AsyncIterator[tuple[str, Path]]:
    """A server over TLS with a private CA (`127.0.0.1:PORT`, the CA's file); every request
    is answered 200, which no test here reaches."""
    if OPENSSL is None:
        pytest.skip("the openssl command is not installed (apt-get install openssl)")
    ca = make_ca(tmp_path)
    cert, key = make_server_cert(tmp_path, "server")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)

    async def ok(_request: web.Request) -> web.Response:
        return web.json_response({})

    app = web.Application()
    app.router.add_put("/api/v1/machines/{name}/report", ok)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = runner.addresses[0][1]
    yield f"127.0.0.1:{port}", ca
    await runner.cleanup()


async def _refusal(coordinator: str, token: str = TOKEN, **client: Any) -> CoordinatorError:
    async with aiohttp.ClientSession() as session:
        sender = CoordinatorClient(session, coordinator, "gpu-01", token, **client)
        with pytest.raises(CoordinatorError) as caught:
            await sender.report(_body())
    return caught.value


async def test_a_certificate_not_trusted_names_ca_file(tls_server: tuple[str, Path]) -> None:
    """No CA given (the system's store does not know a private CA): the words name the setting
    that fixes it, not only Python's SSLCertVerificationError."""
    address, _ca = tls_server
    error = await _refusal(f"https://{address}")
    assert error.misconfigured
    assert str(error).startswith(
        f"https://{address}/api/v1/machines/gpu-01/report: its certificate is not trusted here ("
    )
    assert "name the CA that signed it with ca_file in agent.toml, --ca-file" in str(error)
    assert "_ssl.c" not in str(error)


async def test_plain_http_to_a_tls_port_says_try_https(tls_server: tuple[str, Path]) -> None:
    """`http://` to a coordinator that serves https: the server hangs up on the plain request,
    and the words say so and give the https URL."""
    address, _ca = tls_server
    error = await _refusal(f"http://{address}")
    assert error.misconfigured
    assert str(error) == (
        f"http://{address}/api/v1/machines/gpu-01/report: it answered nothing over plain http; "
        f"it may serve https: try https://{address} as coordinator"
    )


async def test_a_refused_token_names_its_file(coordinator: Coordinator) -> None:
    """A 401 says the token is unknown or revoked, names the file it came from and the command
    that makes this machine's."""
    error = await _refusal(coordinator.url, "wrong", read_from="/etc/astraeus/agent-token")
    assert error.misconfigured
    assert str(error) == (
        f"HTTP 401 from {coordinator.url}/api/v1/machines/gpu-01/report: the coordinator does "
        "not know this agent's token (unknown or revoked); the token came from "
        "/etc/astraeus/agent-token: put the agent token made for this machine there (astra "
        "astraeus token create --role agent --machine gpu-01) and restart the agent. The "
        'coordinator said: {"error": "bad token"}'
    )


async def test_an_unreachable_coordinator_is_not_a_mistake_of_the_agent() -> None:
    """Nothing listening: an outage, which the usual short back-off serves."""
    with refusing_port() as port:
        error = await _refusal(f"http://127.0.0.1:{port}")
    assert not error.misconfigured
    assert " unreachable: " in str(error)


async def test_the_agent_backs_off_to_minutes_while_its_settings_are_refused(
    harness: Harness,
) -> None:
    """Refused for its own settings, the agent doubles its wait up to 5 minutes (not its
    outage cap); the first report that gets through ends the back-off."""
    agent = harness.build()
    agent.rng = lambda: 1.0
    refused = CoordinatorError("HTTP 401", misconfigured=True)
    original = agent.client.report

    async def refuse(_body: AgentReport) -> Any:
        raise refused

    agent.client.report = refuse  # type: ignore[method-assign]
    waits = [await agent._report_or_back_off() for _ in range(14)]
    assert waits[:3] == pytest.approx([0.1, 0.2, 0.4])  # doubling from the base
    assert waits[-1] == pytest.approx(300.0)  # capped at five minutes, not at 0.4 s
    refused.misconfigured = False
    assert await agent._report_or_back_off() == pytest.approx(0.4)  # an outage: its own cap
    agent.client.report = original  # type: ignore[method-assign]
    assert await agent._report_or_back_off() == agent.interval
    assert agent.failures == 0
