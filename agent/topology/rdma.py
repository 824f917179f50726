"""RDMA ports from `/sys/class/infiniband` under a configurable root (docs/hardware.md §5)."""

import ipaddress
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from astraeus.shared import LinkLayer, RdmaPort

log = logging.getLogger(__name__)

OMNI_PATH_DRIVERS = ("hfi1",)

# Every kernel form: "400 Gb/sec (4X NDR)", "2.5 Gb/sec (1X SDR)" and the old "10 Gb/sec (4X)".
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s+Gb/sec(?:\s+\((\d+)X(?:\s+(\w+))?\))?")


def parse_rate(text: str) -> float | None:
    """The port's rate in Gb/s, or None for a form we do not know."""
    match = _RATE.match(text)
    return float(match.group(1)) if match else None


def parse_state(text: str) -> str:
    """`4: ACTIVE` → `ACTIVE`; `5: LinkUp` → `LinkUp`; `7: Phy Test` → `Phy Test`."""
    _, sep, name = text.strip().partition(": ")
    return name if sep else text.strip()


def subnet_prefix(gid: str) -> str | None:
    """The first 64 bits of a GID as 16 hex digits, e.g. `fe80000000000000`; None when unset."""
    try:
        raw = ipaddress.IPv6Address(gid.strip()).packed
    except ValueError:
        return None
    return raw[:8].hex() if any(raw) else None


def fabric_name(prefix: str) -> str:
    """The derived fabric of an InfiniBand port: its GID 0 subnet prefix."""
    return f"ib-{prefix}"


def read_ports(sysfs_root: Path) -> list[RdmaPort]:
    """Every port of every RDMA device, sorted by device and port."""
    base = sysfs_root / "class/infiniband"
    try:
        devices = sorted(os.listdir(base))
    except OSError:
        return []
    ports = []
    for device in devices:
        for port_dir in _port_dirs(base / device):
            port = _read_port(base / device, port_dir)
            if port is not None:
                ports.append(port)
    return ports


REREAD_SCANS = 100
"""A port's unchanging facts are read again this often even when nothing said they changed."""


@dataclass
class _Seen:
    """A port as last read in full, and the state, physical state and rate texts beside it."""

    port: RdmaPort | None
    """None: a port of another link layer (Omni-Path's own, say), skipped."""
    live: tuple[str | None, ...]
    scans: int = 0


class PortReader:
    """The ports, scan after scan, without reading what does not change.

    Each scan lists the devices and their ports and reads three files per port: `state`,
    `phys_state` and `rate`. The rest of a port (link layer, GID 0 subnet prefix, PCI device,
    driver, NUMA node, RoCE netdev) is read in full when the port appears, when any of those
    three changed (a link that comes back may come back on another subnet, at another rate),
    after `refresh()` (the scanning loop calls it on a udev event) and every `REREAD_SCANS`
    scans. The counters are read every scan, from paths worked out once per port."""

    def __init__(self, sysfs_root: Path) -> None:
        self.base = sysfs_root / "class/infiniband"
        self._seen: dict[str, _Seen] = {}
        self._counter_paths: dict[str, list[tuple[str, str]]] = {}

    def refresh(self) -> None:
        """Read every port in full at the next scan."""
        self._seen.clear()

    def read(self) -> list[RdmaPort]:
        """Every port of every RDMA device, sorted by device and port (as `read_ports`)."""
        return self.scan()[0]

    def counters(self) -> dict[str, dict[str, float]]:
        """As `read_counters`."""
        return self.scan()[1]

    def scan(self) -> tuple[list[RdmaPort], dict[str, dict[str, float]]]:
        """`(read(), counters())` from one listing of the devices and their ports."""
        ports: list[RdmaPort] = []
        found: dict[str, dict[str, float]] = {}
        seen: dict[str, _Seen] = {}
        paths: dict[str, list[tuple[str, str]]] = {}
        for device, port_dir in self._port_dirs():
            key = f"{device}:{port_dir.name}"
            where = str(port_dir)
            live = tuple(_fast_text(f"{where}/{name}") for name in _LIVE)
            before = self._seen.get(key)
            if before is None or before.live != live or before.scans >= REREAD_SCANS:
                before = _Seen(_read_port(self.base / device, port_dir), live)
            before.scans += 1
            seen[key] = before
            if before.port is not None:
                ports.append(before.port)
            files = self._counter_paths.get(key) or [
                (name, f"{where}/counters/{name}") for name in PORT_COUNTERS
            ]
            paths[key] = files
            values = {}
            for name, path in files:
                text = _fast_text(path) or ""
                if text.isdigit():
                    values[name] = float(text)
            if values:
                found[key] = values
        self._seen, self._counter_paths = seen, paths
        return ports, found

    def _port_dirs(self) -> list[tuple[str, Path]]:
        try:
            devices = sorted(os.listdir(self.base))
        except OSError:
            return []
        return [(d, port_dir) for d in devices for port_dir in _port_dirs(self.base / d)]


_LIVE = ("state", "phys_state", "rate")


def _fast_text(path: str) -> str | None:
    """A small sysfs file's text, stripped; None when it cannot be read. (`Path.read_text`
    costs several times more, which adds up over every port's files every scan.)"""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(fd, 4096).decode().strip()
    except (OSError, UnicodeDecodeError):
        return None
    finally:
        os.close(fd)


def read_states(sysfs_root: Path) -> dict[str, str]:
    """`{"mlx5_0:1": "4: ACTIVE/5: LinkUp", ...}`: cheap to poll, since port changes raise no
    udev event."""
    base = sysfs_root / "class/infiniband"
    states = {}
    try:
        devices = os.listdir(base)
    except OSError:
        return {}
    for device in devices:
        for port_dir in _port_dirs(base / device):
            state = _text(port_dir / "state") or ""
            phys = _text(port_dir / "phys_state") or ""
            states[f"{device}:{port_dir.name}"] = f"{state}/{phys}"
    return states


def _port_dirs(device_dir: Path) -> list[Path]:
    try:
        names = os.listdir(device_dir / "ports")
    except OSError:
        return []
    # port 0 is a switch's management port; RDMA ports for work are numbered from 1
    ports = sorted(n for n in names if n.isdigit() and int(n) >= 1)
    return [device_dir / "ports" / n for n in sorted(ports, key=_numeric)]


def _numeric(name: str) -> int:
    return int(name) if name.isdigit() else 0


def _read_port(device_dir: Path, port_dir: Path) -> RdmaPort | None:
    layer_text = _text(port_dir / "link_layer")
    if layer_text not in (LinkLayer.INFINIBAND, LinkLayer.ETHERNET):
        log.info(
            "skipping %s: link layer %r is neither InfiniBand nor Ethernet", port_dir, layer_text
        )
        return None
    layer = LinkLayer(layer_text)
    rate_text = _text(port_dir / "rate") or ""
    rate = parse_rate(rate_text)
    if rate is None:
        log.warning("%s: rate %r is not a form we know; reporting 0 Gb/s", port_dir, rate_text)
    prefix = subnet_prefix(_text(port_dir / "gids/0") or "")
    pci = _pci(device_dir)
    opa = is_omni_path(device_dir)
    return RdmaPort(
        device=device_dir.name,
        port=int(port_dir.name),
        state=parse_state(_text(port_dir / "state") or "UNKNOWN"),
        physical_state=_optional_state(port_dir / "phys_state"),
        link_layer=layer,
        rate_gbps=rate or 0.0,
        subnet_prefix=prefix,
        fabric=fabric_name(prefix)
        if prefix and layer == LinkLayer.INFINIBAND and not opa
        else None,
        numa_node=_numa(device_dir / "device/numa_node"),
        pci_device=pci,
        netdev=_netdev(port_dir) if layer == LinkLayer.ETHERNET else None,
        omni_path=opa,
    )


def is_omni_path(device_dir: Path) -> bool:
    """An Intel/Cornelis Omni-Path HFI: its driver is hfi1, or, where the `device` link cannot be
    followed, its name is the kernel's (`hfi1_0`) or rdma-core's persistent one (`opap…`), or its
    board says so. It reports the InfiniBand link layer, but it is a fabric of its own."""
    driver = _driver(device_dir / "device/driver")
    if driver is not None:
        return driver in OMNI_PATH_DRIVERS
    board = _text(device_dir / "board_id") or ""
    return device_dir.name.startswith(("hfi1_", "opa")) or "Omni-Path" in board


def _driver(path: Path) -> str | None:
    try:
        return Path(os.readlink(path)).name
    except OSError:
        return None


def _optional_state(path: Path) -> str | None:
    text = _text(path)
    return parse_state(text) if text else None


def _netdev(port_dir: Path) -> str | None:
    """The netdev of a RoCE port: the first GID that names one (IB GIDs answer EINVAL)."""
    try:
        indexes = sorted(os.listdir(port_dir / "gid_attrs/ndevs"), key=_numeric)
    except OSError:
        return None
    for index in indexes:
        name = _text(port_dir / "gid_attrs/ndevs" / index)
        if name:
            return name
    return None


def _pci(device_dir: Path) -> str | None:
    try:
        return Path(os.path.realpath(device_dir / "device", strict=True)).name
    except OSError:
        return None


def _numa(path: Path) -> int | None:
    text = _text(path)
    try:
        node = int(text) if text else -1
    except ValueError:
        return None
    return node if node >= 0 else None


def _text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


PORT_COUNTERS = (
    "link_downed",
    "link_error_recovery",
    "symbol_error",
    "port_rcv_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
)
"""The IB port error counters port health watches (decimal; `N/A (no PMA)` is skipped)."""


def read_counters(sysfs_root: Path) -> dict[str, dict[str, float]]:
    """`{"mlx5_0:1": {"symbol_error": 0.0, ...}}` for every port that has counters."""
    base = sysfs_root / "class/infiniband"
    found: dict[str, dict[str, float]] = {}
    try:
        devices = os.listdir(base)
    except OSError:
        return found
    for device in devices:
        for port_dir in _port_dirs(base / device):
            values = {}
            for name in PORT_COUNTERS:
                text = _text(port_dir / "counters" / name) or ""
                if text.isdigit():
                    values[name] = float(text)
            if values:
                found[f"{device}:{port_dir.name}"] = values
    return found
