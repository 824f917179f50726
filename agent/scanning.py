"""The agent's scanning loop: a periodic scan, an immediate rescan on udev events, port state
changes and Xid events, and the latest report for the local API and the report loop."""

import asyncio
import contextlib
import logging
from collections.abc import Callable

from astraeus.shared import MachineReport

from .inventory import Scanner
from .settings import SCAN_SECONDS
from .watch import Monitor, PortPoller, UdevWatch, WatchUnavailableError, udev_monitor

log = logging.getLogger(__name__)

PORT_POLL_SECONDS = 5.0


class ScanService:
    def __init__(
        self,
        scanner: Scanner,
        *,
        scan_seconds: float = SCAN_SECONDS,
        port_poll_seconds: float = PORT_POLL_SECONDS,
        monitor_factory: Callable[[], Monitor] = udev_monitor,
    ) -> None:
        self.scanner = scanner
        self.scan_seconds, self.port_poll_seconds = scan_seconds, port_poll_seconds
        self._monitor_factory = monitor_factory
        self.report: MachineReport | None = None
        self.scans = 0
        self.last_cause = "start"
        self.watching = ""
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._udev: UdevWatch | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._refresh = False
        """A udev event came: the next scan reads the unchanging facts afresh."""

    def request_rescan(self, cause: str) -> None:
        """Ask for a scan now; safe from any thread."""
        log.info("rescan: %s", cause)
        if self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._wake_with, cause)

    def _wake_with(self, cause: str) -> None:
        self.last_cause = cause
        self._wake.set()

    async def start(self) -> MachineReport:
        """Scan once, then keep scanning in the background; returns the first report."""
        self._loop = asyncio.get_running_loop()
        report = await self.scan_now()
        self._start_udev()
        self.scanner.start_listening(lambda: self.request_rescan("Xid event"))
        poller = PortPoller(self.scanner.sysfs_root)  # the baseline is what this scan saw
        self._tasks = [
            asyncio.create_task(self._scan_loop(), name="scan"),
            asyncio.create_task(self._poll_ports(poller), name="port-poll"),
        ]
        return report

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        if self._udev is not None:
            self._udev.detach()
        await asyncio.to_thread(self.scanner.close)

    def device_changed(self, cause: str) -> None:
        """A udev event: rescan now, reading every device's unchanging facts afresh."""
        self._refresh = True
        self.request_rescan(cause)

    async def scan_now(self) -> MachineReport:
        if self._refresh:
            self._refresh = False
            self.scanner.refresh()  # between scans: they run one at a time
        self.report = await asyncio.to_thread(self.scanner.scan)
        self.scans += 1
        return self.report

    def _start_udev(self) -> None:
        try:
            monitor = self._monitor_factory()
        except WatchUnavailableError as exc:
            self.watching = f"{exc}; scanning every {self.scan_seconds:g} s and polling ports"
            log.warning("%s", self.watching)
            return
        self._udev = UdevWatch(monitor, self.device_changed)
        self._udev.attach(asyncio.get_running_loop())
        self.watching = "udev events for " + ", ".join(("infiniband", "net", "pci", "drm"))

    async def _scan_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.scan_seconds)
            self._wake.clear()
            try:
                await self.scan_now()
            except Exception:  # a scan that fails keeps the last report and tries again
                log.exception("scan failed")

    async def _poll_ports(self, poller: PortPoller) -> None:
        while True:
            await asyncio.sleep(self.port_poll_seconds)
            for change in poller.changes():
                self.request_rescan(change)
