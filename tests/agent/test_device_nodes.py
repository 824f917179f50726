"""Each GPU's own device node, from facts: NVML's minor number, or the DRM render node in sysfs."""

import os
from collections.abc import Callable
from pathlib import Path

from astraeus.agent.backends.drm import render_node
from astraeus.agent.backends.intel import IntelBackend
from astraeus.agent.fake import FakeMachine
from astraeus.agent.inventory import Scanner
from astraeus.shared.clock import FakeClock

Factory = Callable[[str], FakeMachine]


def _scan(machine: FakeMachine, tmp_path: Path, clock: FakeClock) -> list[tuple[int, str | None]]:
    scanner = Scanner(name="", backend=machine, data_dir=tmp_path / "data", clock=clock)
    try:
        return [(g.index, g.device_node) for g in scanner.scan().gpus]
    finally:
        scanner.close()


def test_nvidia_nodes_are_the_minor_numbers(
    machine_factory: Factory, tmp_path: Path, clock: FakeClock
) -> None:
    """Every H100 reports /dev/nvidia<minor>, as nvmlDeviceGetMinorNumber gives it."""
    nodes = _scan(machine_factory("h100-sxm"), tmp_path, clock)
    assert nodes == [(i, f"/dev/nvidia{i}") for i in range(8)]


def test_a_gpu_gone_from_the_bus_shifts_indexes_not_minor_numbers(
    machine_factory: Factory, tmp_path: Path, clock: FakeClock
) -> None:
    """With GPU 2 gone, NVML's index 2 is the GPU in slot 3, and its node stays /dev/nvidia3:
    the node comes from the driver's minor number, never from the index."""
    machine = machine_factory("h100-sxm")
    _scan(machine, tmp_path, clock)  # known GPUs remembered
    machine.remove_gpu(2)
    nodes = dict(_scan(machine, tmp_path, clock)[:7])
    assert (nodes[2], nodes[6]) == ("/dev/nvidia3", "/dev/nvidia7")


def test_without_a_minor_number_the_node_is_unknown(
    machine_factory: Factory, tmp_path: Path, clock: FakeClock
) -> None:
    """A driver that cannot say the minor number leaves the node unknown (a worker is then
    refused that GPU), and the scan says which call was missing."""
    machine = machine_factory("l40s-pcie")
    machine.spec.gpus.unsupported = ["nvmlDeviceGetMinorNumber"]
    scanner = Scanner(name="", backend=machine, data_dir=tmp_path / "data", clock=clock)
    report = scanner.scan()
    scanner.close()
    assert {g.device_node for g in report.gpus} == {None}
    missing = [w for w in scanner.warnings if w.startswith("nvmlDeviceGetMinorNumber")]
    assert missing == ["nvmlDeviceGetMinorNumber: Function Not Found (GPUs 0, 1, 2, 3)"]


def test_amd_nodes_are_their_render_nodes(
    machine_factory: Factory, tmp_path: Path, clock: FakeClock
) -> None:
    """Each MI300X reports the renderD node its PCI device lists under drm/ in sysfs."""
    nodes = _scan(machine_factory("mi300x"), tmp_path, clock)
    assert nodes == [(i, f"/dev/dri/renderD{128 + i}") for i in range(8)]


def _pci_gpu(sys_root: Path, bdf: str, *minors: str) -> Path:
    """A PCI device as the kernel lays it out, with a `drm/` entry per DRM minor."""
    dev = sys_root / "devices/pci0000:00" / bdf
    for minor in minors:
        (dev / "drm" / minor).mkdir(parents=True)
        (dev / "drm" / minor / "dev").write_text("226:0\n")
    dev.mkdir(parents=True, exist_ok=True)
    return dev


def test_render_node_from_sysfs(tmp_path: Path) -> None:
    """The render node is the device's `drm/renderD<n>`; a device with only a card has none."""
    assert render_node(_pci_gpu(tmp_path, "0000:c1:00.0", "card1", "renderD129")) == (
        "/dev/dri/renderD129"
    )
    assert render_node(_pci_gpu(tmp_path, "0000:c2:00.0", "card2")) is None
    assert render_node(tmp_path / "devices/pci0000:00/0000:ff:00.0") is None


def test_intel_nodes_are_their_render_nodes(tmp_path: Path) -> None:
    """An Intel card's sample carries the render node listed under its PCI device."""
    dev = _pci_gpu(tmp_path, "0000:03:00.0", "card0", "renderD128")
    (dev / "vendor").write_text("0x8086\n")
    drivers = tmp_path / "bus/pci/drivers/xe"
    drivers.mkdir(parents=True)
    (dev / "driver").symlink_to(os.path.relpath(drivers, dev))
    card = tmp_path / "class/drm/card0"
    card.mkdir(parents=True)
    (card / "device").symlink_to(os.path.relpath(dev, card))
    assert [s.device_node for s in IntelBackend(tmp_path).sample()] == ["/dev/dri/renderD128"]
