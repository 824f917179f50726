"""Change detection: udev events and port state changes trigger a rescan; no udev degrades."""

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import until_async

from astraeus.agent.fake import FakeMachine
from astraeus.agent.fake.state import XID_LOG
from astraeus.agent.inventory import Scanner
from astraeus.agent.scanning import ScanService
from astraeus.agent.watch import PortPoller, WatchUnavailableError, udev_monitor
from astraeus.shared.clock import FakeClock

Factory = Callable[[str], FakeMachine]


@dataclass
class FakeDevice:
    action: str
    subsystem: str
    sys_name: str


class FakeMonitor:
    """Shaped like a started `pyudev.Monitor`: a readable fd and a non-blocking poll."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        self.pending: list[FakeDevice] = []

    def fileno(self) -> int:
        return self._read

    def emit(self, device: FakeDevice) -> None:
        self.pending.append(device)
        os.write(self._write, b"x")

    def poll(self, timeout: float | None = None) -> FakeDevice | None:
        with contextlib.suppress(BlockingIOError):
            os.read(self._read, 1)
        return self.pending.pop(0) if self.pending else None

    def close(self) -> None:
        os.close(self._read)
        os.close(self._write)


def test_port_poller_sees_state_changes(machine_factory: Factory) -> None:
    """A port going down shows as one change naming the port and both states."""
    machine = machine_factory("h100-sxm")
    assert machine.root is not None
    poller = PortPoller(machine.root / "sys")
    assert poller.changes() == []
    machine.set_port_state(1, "1: DOWN", "3: Disabled")
    assert poller.changes() == ["port mlx5_1:1: 4: ACTIVE/5: LinkUp -> 1: DOWN/3: Disabled"]
    assert poller.changes() == []


def test_udev_without_netlink_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """When pyudev cannot be used the reason says udev events are unavailable."""
    import sys

    monkeypatch.setitem(sys.modules, "pyudev", None)
    with pytest.raises(WatchUnavailableError, match=r"^udev events unavailable: "):
        udev_monitor()


def _service(
    machine: FakeMachine, tmp_path: Path, clock: FakeClock, monitor: object
) -> ScanService:
    scanner = Scanner(name="", backend=machine, data_dir=tmp_path / "data", clock=clock)

    def factory() -> object:
        if isinstance(monitor, Exception):
            raise monitor
        return monitor

    return ScanService(scanner, scan_seconds=3600, port_poll_seconds=0.05,
                       monitor_factory=factory)  # type: ignore[arg-type]  # fmt: skip


async def test_udev_event_triggers_rescan(
    machine_factory: Factory, tmp_path: Path, clock: FakeClock
) -> None:
    """A udev event for a watched subsystem makes the service scan at once."""
    monitor = FakeMonitor()
    service = _service(machine_factory("l40s-pcie"), tmp_path, clock, monitor)
    await service.start()
    assert service.scans == 1
    assert service.watching == "udev events for infiniband, net, pci, drm"
    monitor.emit(FakeDevice("add", "pci", "0000:c1:00.0"))
    await until_async("a second scan", lambda: service.scans == 2)
    assert service.last_cause == "udev: add pci 0000:c1:00.0"
    await service.stop()
    monitor.close()


async def test_port_change_triggers_rescan_without_udev(
    machine_factory: Factory, tmp_path: Path, clock: FakeClock
) -> None:
    """Without udev the service says so, and a port going down still rescans via polling."""
    machine = machine_factory("h100-sxm")
    service = _service(
        machine, tmp_path, clock, WatchUnavailableError("udev events unavailable: no netlink")
    )
    await service.start()
    assert service.watching == (
        "udev events unavailable: no netlink; scanning every 3600 s and polling ports"
    )
    machine.set_port_state(0, "1: DOWN", "2: Polling")
    await until_async("a second scan", lambda: service.scans == 2)
    assert service.report is not None
    assert service.report.rdma_ports[0].state == "DOWN"
    assert service.last_cause == "port mlx5_0:1: 4: ACTIVE/5: LinkUp -> 1: DOWN/2: Polling"
    await service.stop()


async def test_xid_event_triggers_rescan(
    machine_factory: Factory, tmp_path: Path, clock: FakeClock
) -> None:
    """An Xid heard by the event thread rescans at once, and the GPU is faulted."""
    machine = machine_factory("h100-sxm")
    service = _service(machine, tmp_path, clock, WatchUnavailableError("no udev"))
    await service.start()
    machine.inject_xid(6, 79)
    await until_async(
        "GPU 6 faulted by a rescan",
        lambda: (
            service.scans >= 2
            and service.report is not None
            and service.report.gpus[6].health.state == "faulted"
        ),
    )
    assert service.last_cause == "Xid event"
    await service.stop()


def test_real_udev_monitor_when_netlink_is_there() -> None:
    """Where netlink is available, the real pyudev monitor starts with a pollable fd."""
    try:
        monitor = udev_monitor()
    except WatchUnavailableError as exc:
        pytest.skip(str(exc))
    assert monitor.fileno() >= 0


async def test_an_xid_appended_to_the_fake_machines_log_faults_its_gpu(
    machine_factory: Factory, tmp_path: Path, clock: FakeClock
) -> None:
    """A line `<index> <xid>` appended to the fake machine's `xids` file (how a test reaches
    an agent running as its own process) is heard as the driver's Xid: the GPU is faulted by
    a rescan; a malformed line is skipped."""
    machine = machine_factory("h100-sxm")
    service = _service(machine, tmp_path, clock, WatchUnavailableError("no udev"))
    await service.start()
    assert machine.root is not None
    (machine.root / XID_LOG).write_text("not an xid\n3 79\n")
    await until_async(
        "GPU 3 faulted by a rescan",
        lambda: service.report is not None and service.report.gpus[3].health.state == "faulted",
    )
    assert [gpu.health.state for gpu in service.report.gpus].count("faulted") == 1
    await service.stop()


async def test_udev_event_reads_unchanging_facts_afresh(
    machine_factory: Factory, tmp_path: Path, clock: FakeClock
) -> None:
    """What a scan keeps as unchanging (a port's GID subnet) is read again after a udev event,
    though the port's state never changed; without the event it stays as read."""
    machine = machine_factory("h100-sxm")
    monitor = FakeMonitor()
    service = _service(machine, tmp_path, clock, monitor)
    await service.start()
    assert machine.root is not None
    gid = machine.root / "sys/class/infiniband/mlx5_0/ports/1/gids/0"
    gid.write_text("fe80:0000:0000:00b2:0c42:a103:0065:ab12\n")
    await service.scan_now()
    assert service.report is not None
    assert service.report.rdma_ports[0].subnet_prefix == "fe80000000000000"
    monitor.emit(FakeDevice("change", "infiniband", "mlx5_0"))
    await until_async("a rescan", lambda: service.scans == 3)
    assert service.report.rdma_ports[0].subnet_prefix == "fe800000000000b2"
    await service.stop()
    monitor.close()
