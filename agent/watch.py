"""Change detection: udev events for the `infiniband`, `net`, `pci` and `drm` subsystems ask
for an immediate rescan; InfiniBand port state changes raise no udev event, so ports are polled
(docs/hardware.md §7). pyudev may be unavailable (no netlink in a container): that degrades to
polling and periodic scans, with the reason logged."""

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from .topology.rdma import read_states

log = logging.getLogger(__name__)

SUBSYSTEMS = ("infiniband", "net", "pci", "drm")


class Monitor(Protocol):
    """The part of `pyudev.Monitor` we use."""

    def fileno(self) -> int: ...

    def poll(self, timeout: float | None = None) -> Any: ...


class WatchUnavailableError(Exception):
    pass


def udev_monitor(source: str = "udev") -> Monitor:
    """A started pyudev monitor filtered to our subsystems, or `WatchUnavailableError`."""
    try:
        import pyudev

        monitor = pyudev.Monitor.from_netlink(pyudev.Context(), source=source)
        for subsystem in SUBSYSTEMS:
            monitor.filter_by(subsystem)
        monitor.start()  # the fd is non-blocking from here on
    except Exception as exc:  # ImportError, OSError without netlink, libudev missing
        raise WatchUnavailableError(f"udev events unavailable: {exc}") from None
    return monitor  # type: ignore[no-any-return]


class UdevWatch:
    """Reads every pending udev event when the monitor's fd is readable."""

    def __init__(self, monitor: Monitor, on_change: Callable[[str], None]) -> None:
        self.monitor, self._on_change = monitor, on_change
        self._loop: asyncio.AbstractEventLoop | None = None

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        loop.add_reader(self.monitor.fileno(), self.readable)

    def detach(self) -> None:
        if self._loop is not None:
            self._loop.remove_reader(self.monitor.fileno())
            self._loop = None

    def readable(self) -> None:
        while (device := self.monitor.poll(timeout=0)) is not None:
            self._on_change(f"udev: {device.action} {device.subsystem} {device.sys_name}")


class PortPoller:
    """Compares every RDMA port's state and physical state with the last look."""

    def __init__(self, sysfs_root: Path) -> None:
        self._root = sysfs_root
        self._last = read_states(sysfs_root)

    def changes(self) -> list[str]:
        now = read_states(self._root)
        changed = [
            f"port {port}: {self._last.get(port, 'absent')} -> {now.get(port, 'absent')}"
            for port in sorted(set(now) | set(self._last))
            if now.get(port) != self._last.get(port)
        ]
        self._last = now
        return changed
