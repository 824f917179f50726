"""Write a fake machine's /sys, /proc and /dev as real files, in the kernel's exact formats, so
the agent's real parsers read them (docs/hardware.md §5.5, §6, §8, §9)."""

import os
from pathlib import Path
from typing import TYPE_CHECKING

from astraeus.agent.topology.rdma import PORT_COUNTERS
from astraeus.shared import Vendor

from .machine import FakePort

if TYPE_CHECKING:
    from .state import FakeMachine

_PCI_VENDOR = {Vendor.NVIDIA: "0x10de", Vendor.AMD: "0x1002", Vendor.INTEL: "0x8086"}
_DRIVER = {Vendor.NVIDIA: "nvidia", Vendor.AMD: "amdgpu", Vendor.INTEL: "xe"}


def _put(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def _link(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink():
        link.unlink()
    link.symlink_to(os.path.relpath(target, link.parent))


def write_tree(machine: "FakeMachine", root: Path) -> None:
    sys = root / "sys"
    _put(sys / "devices/system/cpu/online", f"0-{machine.spec.cores - 1}")
    _write_gpus(machine, sys)
    for index in range(machine.spec.rdma.count):
        _write_port(machine, sys, index)
    _write_ethernet(machine, sys)
    _write_proc(machine, root / "proc")
    if machine.spec.imex:
        (root / "dev/nvidia-caps-imex-channels").mkdir(parents=True, exist_ok=True)
    for name in machine.spec.drives:
        (root / "drives" / name).mkdir(parents=True, exist_ok=True)


def _pci_device(sys: Path, bdf: str, vendor: str, numa: int, driver: str) -> Path:
    dev = sys / "devices/pci0000:00" / bdf
    _put(dev / "vendor", vendor)
    _put(dev / "numa_node", str(numa))
    _put(dev / "current_link_speed", "32.0 GT/s PCIe")
    _put(dev / "current_link_width", "16")
    (sys / "bus/pci/drivers" / driver).mkdir(parents=True, exist_ok=True)
    _link(dev / "driver", sys / "bus/pci/drivers" / driver)
    _link(sys / "bus/pci/devices" / bdf, dev)
    return dev


def _write_gpus(machine: "FakeMachine", sys: Path) -> None:
    vendor = machine.spec.gpus.vendor
    for card, index in enumerate(machine.present_gpus()):
        bdf = f"0000:{machine.gpu_bus(index):02x}:00.0"
        dev = _pci_device(sys, bdf, _PCI_VENDOR[vendor], machine.gpu_numa(index), _DRIVER[vendor])
        _put(dev / "device", "0x0bd5" if vendor == Vendor.INTEL else "0x2330")
        _link(sys / "class/drm" / f"card{card}" / "device", dev)
        _write_drm_minors(sys, dev, card)


def _write_drm_minors(sys: Path, dev: Path, card: int) -> None:
    """`<device>/drm/card<n>` and `renderD<128+n>` with their `dev` numbers (DRM major 226), and
    the `class/drm/renderD<n>` entry, as the kernel registers a GPU's DRM minors."""
    for name, minor in ((f"card{card}", card), (f"renderD{128 + card}", 128 + card)):
        _put(dev / "drm" / name / "dev", f"226:{minor}")
        _link(dev / "drm" / name / "device", dev)
    _link(sys / "class/drm" / f"renderD{128 + card}" / "device", dev)


def _write_port(machine: "FakeMachine", sys: Path, index: int) -> None:
    port = machine.port(index)
    bdf = f"0000:{machine.nic_bus(index):02x}:00.0"
    numa = port.numa_node if port.numa_node is not None else machine.nic_numa(index)
    dev = _pci_device(sys, bdf, "0x15b3", numa, "mlx5_core")
    ib = sys / "class/infiniband" / str(port.name)
    guid = f"0c42:a103:00{index:02x}:ab12"
    _put(ib / "node_guid", guid)
    _put(ib / "sys_image_guid", guid)
    _put(ib / "node_type", "1: CA")
    _put(ib / "fw_ver", "28.39.1002")
    _link(ib / "device", dev)
    ports = ib / "ports/1"
    _put(ports / "state", port.state)
    _put(ports / "phys_state", port.phys_state)
    _put(ports / "rate", port.rate)
    _put(ports / "link_layer", port.link_layer)
    _put(ports / "pkeys/0", "0xffff")
    for counter in PORT_COUNTERS:
        _put(ports / "counters" / counter, "0")
    _put(ports / "gid_attrs/types/0", "IB/RoCE v1")
    if port.link_layer == "InfiniBand":
        _write_ib_gids(ports, port, guid, index)
    else:
        _write_roce_gids(ports, port, sys, dev, index)


def _write_ib_gids(ports: Path, port: FakePort, guid: str, index: int) -> None:
    _put(ports / "lid", f"0x{index + 0x1A:x}")
    _put(ports / "sm_lid", "0x1")
    _put(ports / "gids/0", f"{port.subnet_prefix}:{guid}")
    # IB GIDs have no netdev: the kernel answers EINVAL, so there is no ndevs/0 file here.


def _write_roce_gids(ports: Path, port: FakePort, sys: Path, dev: Path, index: int) -> None:
    netdev = port.netdev or f"ens{index + 1}f0np0"
    _put(ports / "lid", "0x0")
    _put(ports / "sm_lid", "0x0")
    _put(ports / "gids/0", f"fe80:0000:0000:0000:0a42:a1ff:fe03:{index:04x}")
    _put(ports / "gid_attrs/ndevs/0", netdev)
    _put(ports / "gids/1", f"0000:0000:0000:0000:0000:ffff:0a00:{index + 1:04x}")
    _put(ports / "gid_attrs/types/1", "RoCE v2")
    _put(ports / "gid_attrs/ndevs/1", netdev)
    gbps = int(float(port.rate.split()[0]))
    _write_netdev(sys, dev, netdev, ifindex=index + 3, speed_mbps=gbps * 1000, state="up")


def _write_ethernet(machine: "FakeMachine", sys: Path) -> None:
    eth = machine.spec.ethernet
    dev = _pci_device(sys, "0000:02:00.0", "0x8086", 0, "ice")
    _write_netdev(sys, dev, eth.name, ifindex=2, speed_mbps=eth.speed_mbps, state=eth.state)


def _write_netdev(
    sys: Path, dev: Path, name: str, *, ifindex: int, speed_mbps: int, state: str
) -> None:
    """A netdev as the kernel shows it: class/net/<name> → the PCI device's net/<name>."""
    net = dev / "net" / name
    _put(net / "operstate", state)
    _put(net / "speed", str(speed_mbps) if state == "up" else "-1")
    _put(net / "mtu", "9000")
    _put(net / "type", "1")
    _put(net / "ifindex", str(ifindex))
    _put(net / "address", fake_mac(ifindex))
    _link(net / "device", dev)
    _link(sys / "class/net" / name, net)


def fake_mac(ifindex: int) -> str:
    return f"0c:42:a1:00:00:{ifindex:02x}"


def _write_proc(machine: "FakeMachine", proc: Path) -> None:
    p = machine.spec.pressure
    total_kb = int(machine.spec.memory_gb * 1024 * 1024)
    available_kb = min(total_kb, p.memory_available_mb * 1024)
    _put(
        proc / "meminfo",
        f"MemTotal:       {total_kb} kB\nMemFree:        {available_kb // 2} kB\n"
        f"MemAvailable:   {available_kb} kB\nBuffers:          123456 kB",
    )
    _put(proc / "loadavg", f"0.50 0.40 0.30 2/{p.processes} 12345")
    _put(proc / "sys/kernel/pid_max", str(p.pid_max))
    _put(proc / "pressure/cpu", _psi(p.cpu_some_avg10) + "\n" + _psi(0.0, "full"))
    _put(proc / "pressure/memory", _psi(p.memory_some_avg10) + "\n" + _psi(0.0, "full"))
    _put(proc / "pressure/io", _psi(p.io_some_avg10) + "\n" + _psi(0.0, "full"))
    devices = ["Character devices:", "  1 mem", "195 nvidia-frontend", "234 nvidia-caps"]
    if machine.spec.imex:
        devices.append("507 nvidia-caps-imex-channels")
    devices += ["", "Block devices:", "  8 sd", "259 blkext"]
    _put(proc / "devices", "\n".join(devices))


def _psi(avg10: float, kind: str = "some") -> str:
    total = 0 if kind == "full" else int(avg10 * 1_000_000)
    return f"{kind} avg10={avg10:.2f} avg60={avg10:.2f} avg300={avg10:.2f} total={total}"
