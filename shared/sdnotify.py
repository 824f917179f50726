"""sd_notify(3) without a dependency: one datagram to `$NOTIFY_SOCKET` per state change."""

import logging
import os
import socket
from collections.abc import Mapping, MutableMapping

log = logging.getLogger(__name__)

SYSTEMD_VARIABLES = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")
"""Meant for the program systemd started alone: a worker that inherited them could ping or
stop it."""


class Notifier:
    """Tells systemd how the agent or the coordinator is doing; does nothing when not started
    as `Type=notify`."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.address = _address(environ.get("NOTIFY_SOCKET", ""))
        self.watchdog_seconds = _watchdog_seconds(environ)

    @classmethod
    def from_environment(cls, environ: MutableMapping[str, str] | None = None) -> "Notifier":
        """Read the systemd variables and remove them, so no child process inherits them."""
        environ = os.environ if environ is None else environ
        notifier = cls(environ)
        for name in SYSTEMD_VARIABLES:
            environ.pop(name, None)
        return notifier

    def notify(self, state: str) -> bool:
        """Send `state` (e.g. `READY=1`); False when there is no socket or it refused."""
        if self.address is None:
            return False
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            try:
                sock.sendto(state.encode(), self.address)
            except OSError as error:
                log.warning("sd_notify %s failed: %s", state.split("=", 1)[0], error)
                return False
        return True

    def ready(self) -> bool:
        return self.notify("READY=1\nSTATUS=reporting to the coordinator")

    def watchdog(self) -> bool:
        return self.notify("WATCHDOG=1")

    def stopping(self) -> bool:
        return self.notify("STOPPING=1")

    def status(self, text: str) -> bool:
        return self.notify(f"STATUS={text}")


def _address(value: str) -> str | bytes | None:
    if value.startswith("@"):
        return b"\0" + value[1:].encode()  # an abstract socket
    if value.startswith("/"):
        return value
    return None


def _watchdog_seconds(environ: Mapping[str, str]) -> float | None:
    usec, pid = environ.get("WATCHDOG_USEC", ""), environ.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) == 0:
        return None
    if pid and pid != str(os.getpid()):
        return None  # the watchdog is meant for another process of the unit
    return int(usec) / 1_000_000
