"""sd_notify against a real AF_UNIX datagram socket: READY, WATCHDOG, STOPPING, and no leaks."""

import asyncio
import os
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import until_async
from runtime_rig import TOKEN, Coordinator, Harness, machine_report

from astraeus.agent.runtime.main import serve
from astraeus.agent.settings import Settings
from astraeus.shared.sdnotify import Notifier

READY = "READY=1\nSTATUS=reporting to the coordinator"


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "notify"))
    sock.setblocking(False)
    yield sock
    sock.close()


def _received(sock: socket.socket) -> list[str]:
    messages = []
    while True:
        try:
            messages.append(sock.recv(4096).decode())
        except BlockingIOError:
            return messages


def test_notify_sends_one_datagram(notify_socket: socket.socket) -> None:
    """Each call is one datagram with systemd's KEY=VALUE lines."""
    notifier = Notifier({"NOTIFY_SOCKET": notify_socket.getsockname()})
    assert [notifier.ready(), notifier.watchdog(), notifier.stopping()] == [True, True, True]
    assert _received(notify_socket) == [
        "READY=1\nSTATUS=reporting to the coordinator",
        "WATCHDOG=1",
        "STOPPING=1",
    ]


def test_abstract_socket_address() -> None:
    """An address starting with @ is an abstract socket, reached with a leading NUL."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(b"\0astraeus-test-" + str(os.getpid()).encode())
        name = sock.getsockname()[1:].decode()
        assert Notifier({"NOTIFY_SOCKET": f"@{name}"}).notify("READY=1")
        assert sock.recv(64) == b"READY=1"


def test_without_systemd_nothing_is_sent() -> None:
    """Outside a Type=notify unit the notifier is silent and has no watchdog."""
    notifier = Notifier({})
    assert (notifier.ready(), notifier.watchdog_seconds) == (False, None)


@pytest.mark.parametrize(
    ("environ", "seconds"),
    [
        pytest.param({"WATCHDOG_USEC": "3000000"}, 3.0, id="ours"),
        pytest.param({"WATCHDOG_USEC": "3000000", "WATCHDOG_PID": "1"}, None, id="another-pid"),
        pytest.param({"WATCHDOG_USEC": "0"}, None, id="zero-disables"),
    ],
)
def test_watchdog_interval(environ: dict[str, str], seconds: float | None) -> None:
    """WATCHDOG_USEC applies only to the process WATCHDOG_PID names (or any, when unset)."""
    assert Notifier(environ).watchdog_seconds == seconds


def test_from_environment_removes_the_variables() -> None:
    """Reading the systemd variables removes them, so no worker can inherit them."""
    environ = {"NOTIFY_SOCKET": "/run/n", "WATCHDOG_USEC": "1", "WATCHDOG_PID": "2", "PATH": "/b"}
    notifier = Notifier.from_environment(environ)
    assert (notifier.address, environ) == ("/run/n", {"PATH": "/b"})


async def test_agent_is_ready_after_its_first_report_and_pings_the_watchdog(
    harness: Harness, coordinator: Coordinator, notify_socket: socket.socket
) -> None:
    """WATCHDOG=1 comes from the event loop even while reports fail; READY=1 only after one
    succeeds, and once."""
    address = notify_socket.getsockname()
    harness.notifier = Notifier({"NOTIFY_SOCKET": address, "WATCHDOG_USEC": "100000"})
    seen: list[str] = []
    await coordinator.down()
    agent = await harness.start()
    await until_async(
        "failed reports and two watchdog pings",
        lambda: seen.extend(_received(notify_socket)) or (agent.failures and len(seen) >= 2),
    )
    assert set(seen) == {"WATCHDOG=1"}
    await coordinator.start()
    await until_async("READY", lambda: seen.extend(_received(notify_socket)) or READY in seen)
    await until_async("more reports", lambda: agent.reports >= 3)
    seen.extend(_received(notify_socket))
    assert seen.count(READY) == 1


async def test_serve_says_stopping_on_sigterm(
    coordinator: Coordinator,
    notify_socket: socket.socket,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The real service sends READY, then STOPPING when SIGTERM arrives, and returns."""
    monkeypatch.setenv("NOTIFY_SOCKET", notify_socket.getsockname())
    settings = Settings(
        coordinator=coordinator.url,
        token_file=tmp_path / "token",
        name="gpu-01",
        state_dir=tmp_path / "state",
        report_interval_seconds=0.05,
    )
    service = asyncio.create_task(serve(settings, TOKEN, machine_report))
    seen: list[str] = []
    await until_async("READY", lambda: seen.extend(_received(notify_socket)) or seen)
    assert "NOTIFY_SOCKET" not in os.environ
    os.kill(os.getpid(), signal.SIGTERM)
    await service
    seen.extend(_received(notify_socket))
    assert seen == [READY, "STOPPING=1"]
