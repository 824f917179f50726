"""sd_notify without a dependency: READY=1 once listening, WATCHDOG=1 from the event loop."""

from __future__ import annotations

import asyncio
import os
import socket


def notify(message: str) -> bool:
    """Send one message to systemd; False when not run by systemd (no NOTIFY_SOCKET)."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]  # an abstract socket
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
        try:
            sock.connect(address)
            sock.sendall(message.encode())
        except OSError:
            return False
    return True


def watchdog_interval() -> float | None:
    """Half of WatchdogSec, when systemd asked for pings (for this process)."""
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    if not usec or not usec.isdigit() or (pid and pid != str(os.getpid())):
        return None
    return int(usec) / 2_000_000


async def watchdog(interval: float) -> None:
    """Ping from the event loop itself, so a stuck loop stops the pings and systemd restarts us."""
    while True:
        notify("WATCHDOG=1")
        await asyncio.sleep(interval)
