"""The coordinator as a systemd `Type=notify` service: READY, watchdog pings, STOPPING."""

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def _messages(sock: socket.socket, until: str) -> list[str]:
    seen: list[str] = []
    while not any(until in message for message in seen):
        seen.append(sock.recv(4096).decode())
    return seen


def test_service_notifies_systemd(tmp_path: Path) -> None:
    """`serve` says READY=1 once listening, pings WATCHDOG=1, and says STOPPING=1 on SIGTERM."""
    address = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(address))
        sock.settimeout(60)
        env = {
            **os.environ,
            "NOTIFY_SOCKET": str(address),
            "WATCHDOG_USEC": "400000",  # a ping every 0.2 s
        }
        env.pop("WATCHDOG_PID", None)
        service = subprocess.Popen(
            [BIN / "astraeus-coordinator", "serve", "--listen", "127.0.0.1:0",
             "--state-dir", str(tmp_path), "--db", str(tmp_path / "a.db")],
            env=env, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            started = _messages(sock, "WATCHDOG=1")
            service.send_signal(signal.SIGTERM)
            stopped = _messages(sock, "STOPPING=1")
            assert service.wait(timeout=60) == 0
        finally:
            service.kill()
            service.wait()
    assert started[0].startswith("READY=1")
    assert "STOPPING=1" in stopped
