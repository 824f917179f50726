"""RDMA ports read from a sysfs tree laid out exactly like /sys/class/infiniband."""

import os
import shutil
from pathlib import Path

import pytest

from astraeus.agent.topology.rdma import (
    REREAD_SCANS,
    PortReader,
    parse_rate,
    parse_state,
    read_counters,
    read_ports,
    read_states,
)
from astraeus.shared import LinkLayer

SPEEDS = {
    "SDR": 2.5, "DDR": 5, "QDR": 10, "FDR10": 10, "FDR": 14, "EDR": 25, "HDR": 50, "NDR": 100,
    "XDR": 200,
}  # fmt: skip
WIDTHS = (1, 2, 4, 8, 12)


def _rate_text(gbps: float, width: int, speed: str) -> str:
    number = f"{gbps:g}"
    return f"{number} Gb/sec ({width}X {speed})"


RATES = [
    pytest.param(_rate_text(per_lane * w, w, speed), per_lane * w, id=f"{w}X-{speed}")
    for speed, per_lane in SPEEDS.items()
    for w in WIDTHS
]


@pytest.mark.parametrize(("text", "gbps"), RATES)
def test_every_kernel_rate_form_parses_to_gbps(text: str, gbps: float) -> None:
    """Every rate string the kernel prints, SDR to XDR and 1X to 12X, gives its Gb/s."""
    assert parse_rate(text + "\n") == pytest.approx(gbps)


@pytest.mark.parametrize(
    ("text", "gbps"),
    [
        pytest.param("10 Gb/sec (4X)\n", 10.0, id="old-sdr-without-speed"),
        pytest.param("2.5 Gb/sec (1X)\n", 2.5, id="old-sdr-1x"),
        pytest.param("40 Gb/sec\n", 40.0, id="no-width"),
        pytest.param("garbage\n", None, id="unknown-form"),
    ],
)
def test_old_and_odd_rate_forms(text: str, gbps: float | None) -> None:
    """The old SDR form without a speed name parses; a form we do not know gives None."""
    assert parse_rate(text) == gbps


@pytest.mark.parametrize(
    ("text", "name"),
    [
        pytest.param("4: ACTIVE\n", "ACTIVE", id="active"),
        pytest.param("1: DOWN\n", "DOWN", id="down"),
        pytest.param("5: LinkUp\n", "LinkUp", id="linkup"),
        pytest.param("7: Phy Test\n", "Phy Test", id="space-in-name"),
        pytest.param("ACTIVE\n", "ACTIVE", id="no-number"),
    ],
)
def test_state_files_give_the_name_part(text: str, name: str) -> None:
    """`4: ACTIVE` reads as ACTIVE, keeping names with spaces whole."""
    assert parse_state(text) == name


def _put(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def _port(sys: Path, dev: str, layer: str, *, bdf: str, numa: str = "0") -> Path:
    pci = sys / "devices/pci0000:16/0000:16:02.0" / bdf
    _put(pci / "numa_node", numa)
    ib = sys / "class/infiniband" / dev
    ib.mkdir(parents=True)
    (ib / "device").symlink_to(os.path.relpath(pci, ib))
    port = ib / "ports/1"
    _put(port / "state", "4: ACTIVE")
    _put(port / "phys_state", "5: LinkUp")
    _put(port / "rate", "400 Gb/sec (4X NDR)")
    _put(port / "link_layer", layer)
    return port


@pytest.fixture
def sys_root(tmp_path: Path) -> Path:
    sys = tmp_path / "sys"
    ib = _port(sys, "ibp12s0", "InfiniBand", bdf="0000:17:00.0")
    _put(ib / "gids/0", "fe80:0000:0000:00a1:0c42:a103:0065:ab12")
    _put(ib.parent / "0/link_layer", "InfiniBand")  # a switch's management port 0
    roce = _port(sys, "rocep193s0f0", "Ethernet", bdf="0000:c1:00.0", numa="-1")
    _put(roce / "rate", "200 Gb/sec (2X NDR)")
    _put(roce / "gids/0", "fe80:0000:0000:0000:0a42:a1ff:fe03:0001")
    (roce / "gid_attrs/ndevs/0").mkdir(parents=True)  # unreadable entry: skipped
    _put(roce / "gid_attrs/ndevs/1", "ens1f0np0")
    odd = _port(sys, "siw0", "Unknown", bdf="0000:d1:00.0")
    _put(odd / "gids/0", "0000:0000:0000:0000:0000:0000:0000:0000")
    return sys


def test_ib_and_roce_ports_read_with_their_details(sys_root: Path) -> None:
    """An IB port gets its subnet prefix and derived fabric; a RoCE port its netdev; neither
    needs an mlx5 name; port 0 and a port whose link layer is neither are skipped."""
    ib, roce = read_ports(sys_root)
    assert (ib.device, ib.port, ib.state, ib.physical_state) == ("ibp12s0", 1, "ACTIVE", "LinkUp")
    assert ib.link_layer == LinkLayer.INFINIBAND
    assert ib.rate_gbps == 400
    assert (ib.subnet_prefix, ib.fabric) == ("fe800000000000a1", "ib-fe800000000000a1")
    assert (ib.pci_device, ib.numa_node, ib.netdev) == ("0000:17:00.0", 0, None)
    assert roce.link_layer == LinkLayer.ETHERNET
    assert roce.rate_gbps == 200
    assert (roce.netdev, roce.fabric, roce.numa_node) == ("ens1f0np0", None, None)
    assert roce.hca_name == "rocep193s0f0:1"


def test_no_infiniband_class_means_no_ports(tmp_path: Path) -> None:
    """A machine without /sys/class/infiniband reports no ports rather than failing."""
    assert read_ports(tmp_path) == []
    assert read_states(tmp_path) == {}


def test_states_snapshot_names_each_port(sys_root: Path) -> None:
    """The polling snapshot keys ports the NCCL way and holds both state files."""
    assert read_states(sys_root)["ibp12s0:1"] == "4: ACTIVE/5: LinkUp"


def test_port_reader_matches_a_full_read_and_sees_changes(sys_root: Path) -> None:
    """Scan after scan the reader gives what a full read gives. A state or rate change re-reads
    the whole port (a link back up may be on another subnet); a change nothing visible points
    to shows after `refresh()` (a udev event) or after REREAD_SCANS scans; ports that come and
    go come and go at once."""
    reader = PortReader(sys_root)
    assert reader.read() == read_ports(sys_root)
    port = sys_root / "class/infiniband/ibp12s0/ports/1"
    _put(port / "gids/0", "fe80:0000:0000:00b2:0c42:a103:0065:ab12")  # a new subnet manager
    assert reader.read()[0].subnet_prefix == "fe800000000000a1"  # nothing said it changed
    _put(port / "state", "1: DOWN")
    down = reader.read()[0]
    assert (down.state, down.subnet_prefix) == ("DOWN", "fe800000000000b2")
    _put(port / "gids/0", "fe80:0000:0000:00c3:0c42:a103:0065:ab12")
    reader.refresh()
    assert reader.read()[0].subnet_prefix == "fe800000000000c3"
    _put(port / "rate", "100 Gb/sec (4X EDR)")
    assert reader.read()[0].rate_gbps == 100
    _put(port / "link_layer", "Ethernet")
    for _ in range(REREAD_SCANS):
        found = reader.read()
    assert found[0].link_layer == LinkLayer.ETHERNET
    assert found == read_ports(sys_root)
    shutil.rmtree(sys_root / "class/infiniband/rocep193s0f0")
    assert [p.device for p in reader.read()] == ["ibp12s0"]
    _port(sys_root, "mlx5_9", "InfiniBand", bdf="0000:e1:00.0")
    assert [p.device for p in reader.read()] == ["ibp12s0", "mlx5_9"]


def test_port_reader_counters_match_a_full_read(sys_root: Path) -> None:
    """The counters, read every scan from paths kept per port, are `read_counters`'s."""
    counters = sys_root / "class/infiniband/ibp12s0/ports/1/counters"
    _put(counters / "symbol_error", "3")
    _put(counters / "port_rcv_errors", "N/A (no PMA)")
    reader = PortReader(sys_root)
    assert reader.counters() == read_counters(sys_root) == {"ibp12s0:1": {"symbol_error": 3.0}}
    _put(counters / "symbol_error", "5")
    assert reader.counters() == {"ibp12s0:1": {"symbol_error": 5.0}}
    shutil.rmtree(sys_root / "class/infiniband/ibp12s0")
    assert reader.counters() == {}
