"""A container runtime counts only when it answers: docker's daemon at its socket (`GET
/_ping`), podman through `podman info`; asked again later, so a daemon that starts after the
agent is found and one that stops is dropped."""

import asyncio
import os
import shutil
import signal
import socketserver
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from helpers import until_async
from runtime_rig import TOKEN, Coordinator

from astraeus.agent.runtime import ContainerRuntimes
from astraeus.agent.runtime.container import (
    DOCKER_SOCKET,
    PING_RECHECK_SECONDS,
    Probe,
    ping_daemon,
    probe_runtime,
)
from astraeus.shared.clock import FakeClock

REAL_DOCKER = shutil.which("docker")
NO_REAL_DOCKER = "needs a docker CLI (without a daemon at /var/run/docker.sock)"


class _Daemon(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    answer = b"HTTP/1.1 200 OK\r\nApi-Version: 1.47\r\nContent-Length: 2\r\n\r\nOK"
    keep_open = threading.Event()
    """While unset, a connection stays open after the answer (HTTP/1.1 keep-alive)."""


class _Ping(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        while self.rfile.readline() not in (b"\r\n", b""):  # the request's head
            pass
        assert isinstance(self.server, _Daemon)
        self.wfile.write(self.server.answer)
        self.wfile.flush()
        self.server.keep_open.wait(10)


@contextmanager
def fake_daemon(path: Path, answer: bytes | None = None) -> Iterator[_Daemon]:
    """A tiny HTTP server on a unix socket answering `/_ping` as dockerd does."""
    server = _Daemon(str(path), _Ping)
    server.keep_open = threading.Event()
    server.keep_open.set()
    if answer is not None:
        server.answer = answer
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        path.unlink(missing_ok=True)


def _which(paths: Mapping[str, str]) -> Callable[[str], str | None]:
    return lambda name: paths.get(name)


def test_a_daemon_that_starts_later_is_found_and_one_that_stops_is_dropped(
    tmp_path: Path,
) -> None:
    """No daemon at DOCKER_HOST: no capability. It starts: found at the next check (not
    sooner: the answer is kept 10 s). It stops: dropped at the check after."""
    sock = tmp_path / "d.sock"
    clock = FakeClock(datetime(2026, 12, 1, tzinfo=UTC))
    runtimes = ContainerRuntimes(
        which=_which({"docker": "/usr/bin/docker"}),
        env={"DOCKER_HOST": f"unix://{sock}"},
        clock=clock,
    )
    assert (runtimes.capabilities(), runtimes.known()) == ([], None)
    with fake_daemon(sock):
        clock.advance(PING_RECHECK_SECONDS / 2)
        assert runtimes.capabilities() == []
        clock.advance(PING_RECHECK_SECONDS / 2)
        assert (runtimes.capabilities(), runtimes.known()) == (["container"], "/usr/bin/docker")
    clock.advance(PING_RECHECK_SECONDS)
    assert (runtimes.capabilities(), runtimes.known()) == ([], None)


def test_ping_says_why_a_daemon_does_not_count(tmp_path: Path) -> None:
    """A missing socket, a refused connection and an answer other than 200 are each said."""
    sock = tmp_path / "d.sock"
    assert ping_daemon(str(sock)) == f"cannot reach the daemon at {sock}: No such file or directory"
    broken = b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n"
    with fake_daemon(sock, broken):
        assert ping_daemon(str(sock)) == (
            f"the daemon at {sock} answered /_ping with 'HTTP/1.1 500 Internal Server Error'"
        )
    with fake_daemon(sock):
        assert ping_daemon(str(sock)) is None


def test_a_daemon_that_keeps_the_connection_open_answers_at_once(tmp_path: Path) -> None:
    """The status line is enough: a daemon holding the connection open after its answer
    (keep-alive) counts at once, not after the ping's timeout."""
    sock = tmp_path / "d.sock"
    with fake_daemon(sock) as daemon:
        daemon.keep_open.clear()
        try:
            assert ping_daemon(str(sock), timeout=5) is None
        finally:
            daemon.keep_open.set()


def test_podman_is_asked_with_info_and_a_broken_one_gives_way_to_docker(tmp_path: Path) -> None:
    """podman has no daemon: `podman info` must succeed. When it fails, docker with an
    answering daemon is used instead; the log says why podman was passed over."""
    calls: list[list[str]] = []

    def run(argv: list[str], **kw: Any) -> "subprocess.CompletedProcess[bytes]":
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 125, b"", b"Error: cannot find storage\n")

    problem = probe_runtime("/usr/bin/podman", {}, run=run)
    assert problem == Probe(
        "`/usr/bin/podman info` failed with exit code 125: Error: cannot find storage", cheap=False
    )
    assert calls == [["/usr/bin/podman", "info"]]
    sock = tmp_path / "d.sock"
    env = {"DOCKER_HOST": f"unix://{sock}"}

    def probe(path: str, env: Mapping[str, str]) -> Probe:
        return probe_runtime(path, env, run=run)

    paths = {"podman": "/usr/bin/podman", "docker": "/usr/bin/docker"}
    with fake_daemon(sock):
        runtimes = ContainerRuntimes(which=_which(paths), probe=probe, env=env)
        assert runtimes.refresh() == "/usr/bin/docker"


@pytest.mark.skipif(REAL_DOCKER is None or os.path.exists(DOCKER_SOCKET), reason=NO_REAL_DOCKER)
def test_the_docker_cli_without_its_daemon_is_no_runtime(caplog: pytest.LogCaptureFixture) -> None:
    """The real docker CLI, no daemon: `docker info` fails, so no `container` capability."""
    caplog.set_level("WARNING")
    env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    runtimes = ContainerRuntimes(which=_which({"docker": str(REAL_DOCKER)}), env=env)
    assert runtimes.capabilities() == []
    assert caplog.messages[0].startswith(
        f"container runtime {REAL_DOCKER} does not answer (`{REAL_DOCKER} info` failed with exit"
    )


@pytest.mark.skipif(REAL_DOCKER is None or os.path.exists(DOCKER_SOCKET), reason=NO_REAL_DOCKER)
async def test_agent_process_with_docker_but_no_daemon_reports_no_container_capability(
    coordinator: Coordinator, tmp_path: Path
) -> None:
    """`astraeus-agent run` on a machine whose only runtime is a docker CLI without its daemon:
    its reports carry no `container` capability, and its log says why."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").symlink_to(str(REAL_DOCKER))
    (tmp_path / "token").write_text(TOKEN + "\n")
    env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    env.update(PATH=str(bin_dir), ASTRAEUS_REPORT_INTERVAL_SECONDS="0.1")
    agent = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "astraeus.agent.cli", "run", "--backend", "fake:l40s-pcie",
        "--coordinator", coordinator.url, "--token-file", str(tmp_path / "token"),
        "--name", "gpu-01", "--state-dir", str(tmp_path / "state"),
        env=env, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        await until_async("three reports", lambda: len(coordinator.capabilities) >= 3)
    finally:
        agent.send_signal(signal.SIGTERM)
        _, stderr = await agent.communicate()
    assert all("container" not in caps for caps in coordinator.capabilities)
    assert f"container runtime {bin_dir / 'docker'} does not answer" in stderr.decode()
