"""Network interfaces from sysfs, with this namespace's addresses only where the interface is
the same one (index and hardware address), physical ones first, at most 32."""

import os
from pathlib import Path

from astraeus.agent.topology.ifaddrs import Addresses, live_addresses
from astraeus.agent.topology.netifs import read_interfaces
from astraeus.shared import NetworkInterface


def _netdev(sys: Path, name: str, *, ifindex: int, mac: str, kind: int = 1, **files: str) -> Path:
    net = sys / "class/net" / name
    net.mkdir(parents=True)
    values = {"type": str(kind), "ifindex": str(ifindex), "address": mac, "operstate": "up"}
    for key, value in {**values, **files}.items():
        (net / key).write_text(value + "\n")
    return net


def _physical(net: Path) -> None:
    device = net.parent.parent.parent / "devices/pci0000:00" / net.name
    device.mkdir(parents=True)
    (net / "device").symlink_to(os.path.relpath(device, net))


def test_interfaces_with_their_own_addresses(tmp_path: Path) -> None:
    """Speed, state, MTU and kind from sysfs; the book's addresses where index and MAC agree;
    loopback left out; -1 speed is unknown."""
    eth = _netdev(tmp_path, "eth0", ifindex=2, mac="0C:42:A1:00:00:02", speed="25000", mtu="9000")
    _physical(eth)
    _netdev(tmp_path, "ib0", ifindex=3, mac="80:00:00:02", kind=32, speed="-1")
    _netdev(tmp_path, "lo", ifindex=1, mac="00:00:00:00:00:00", kind=772)
    book = {
        "eth0": Addresses(2, "0c:42:a1:00:00:02", ["10.0.0.5"], ["fd00::5"]),
        "ib0": Addresses(3, None, ["10.1.0.5"], []),
        "lo": Addresses(1, None, ["127.0.0.1"], ["::1"]),
    }
    interfaces, problems = read_interfaces(tmp_path, book)
    assert problems == []
    assert interfaces == [
        NetworkInterface(
            name="eth0", kind="ethernet", state="up", speed_mbps=25000, mtu=9000,
            mac="0c:42:a1:00:00:02", physical=True, ipv4=["10.0.0.5"], ipv6=["fd00::5"],
        ),
        NetworkInterface(
            name="ib0", kind="infiniband", state="up", speed_mbps=None, mac="80:00:00:02",
            ipv4=["10.1.0.5"],
        ),
    ]  # fmt: skip


def test_another_interface_of_the_same_name_gets_no_addresses(tmp_path: Path) -> None:
    """A tree whose eth0 is not this namespace's eth0 (another index or MAC) gets no addresses,
    so a capture never shows the inspecting host's."""
    _netdev(tmp_path, "eth0", ifindex=2, mac="01:01:01:01:01:01")
    _netdev(tmp_path, "eth1", ifindex=3, mac="02:02:02:02:02:02")
    book = {
        "eth0": Addresses(2, "aa:bb:cc:dd:ee:ff", ["192.0.2.1"], []),
        "eth1": Addresses(7, "02:02:02:02:02:02", ["192.0.2.2"], []),
    }
    interfaces, _ = read_interfaces(tmp_path, book)
    assert [(i.name, i.ipv4) for i in interfaces] == [("eth0", []), ("eth1", [])]


def test_list_is_bounded_physical_first(tmp_path: Path) -> None:
    """40 veths and one NIC: the NIC first, 32 in all, and a warning saying how many."""
    _physical(_netdev(tmp_path, "zz-nic", ifindex=2, mac="0c:00:00:00:00:01"))
    for i in range(40):
        _netdev(tmp_path, f"veth{i:02d}", ifindex=10 + i, mac=f"0e:00:00:00:00:{i:02x}")
    interfaces, problems = read_interfaces(tmp_path, {})
    assert (len(interfaces), interfaces[0].name, interfaces[1].name) == (32, "zz-nic", "veth00")
    assert problems == ["41 network interfaces; reporting the first 32, physical ones first"]


def test_live_addresses_know_loopback() -> None:
    """getifaddrs in this namespace: loopback is interface 1 with 127.0.0.1."""
    lo = live_addresses()["lo"]
    assert (lo.ifindex, "127.0.0.1" in lo.ipv4) == (1, True)


def test_fake_machine_reports_its_management_ethernet(tmp_path: Path) -> None:
    """A fake machine's eth0 comes through the real reader with its spec's speed and address."""
    from astraeus.agent.inventory import Scanner

    scanner = Scanner(name="", backend="fake:l40s-pcie", data_dir=tmp_path)
    [eth] = scanner.scan().network_interfaces
    assert (eth.name, eth.state, eth.speed_mbps, eth.ipv4, eth.physical) == (
        "eth0", "up", 100000, ["127.0.0.1"], True,
    )  # fmt: skip


def test_files_in_class_net_are_not_interfaces(tmp_path: Path) -> None:
    """`bonding_masters` (a file the bonding driver puts in /sys/class/net) and any other entry
    that is not a directory is no interface; a symlinked device directory, as sysfs has, is."""
    _netdev(tmp_path, "eth0", ifindex=2, mac="0c:00:00:00:00:02")
    virtual = tmp_path / "devices/virtual/net/bond0"
    virtual.mkdir(parents=True)
    for key, value in {"type": "1", "ifindex": "4", "address": "0c:00:00:00:00:04"}.items():
        (virtual / key).write_text(value + "\n")
    (tmp_path / "class/net/bond0").symlink_to(os.path.relpath(virtual, tmp_path / "class/net"))
    (tmp_path / "class/net/bonding_masters").write_text("bond0\n")
    (tmp_path / "class/net/dangling").symlink_to("../../devices/virtual/net/gone")
    interfaces, problems = read_interfaces(tmp_path, {})
    assert ([i.name for i in interfaces], problems) == (["bond0", "eth0"], [])
