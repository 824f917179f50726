"""IP network interfaces from `<sysfs>/class/net`: name, operstate, speed, MTU, hardware
address and whether a device backs it; and their addresses, taken from an `AddressBook` only
when the book's interface of that name is the same one (same index and hardware address), so a
captured or foreign sysfs tree never gets this host's addresses."""

import os
from collections.abc import Callable
from pathlib import Path

from astraeus.shared import NetworkInterface
from astraeus.shared.report import MAX_NETWORK_INTERFACES

from .ifaddrs import AddressBook, Addresses

ARPHRD_LOOPBACK = 772
KINDS = {1: "ethernet", 32: "infiniband"}
"""`ARPHRD_ETHER`, `ARPHRD_INFINIBAND` (IPoIB, Omni-Path's too); anything else is `other`."""

AddressReader = Callable[[], AddressBook]


def read_interfaces(
    sysfs_root: Path, book: AddressBook
) -> tuple[list[NetworkInterface], list[str]]:
    """The interfaces, physical first then by name, at most `MAX_NETWORK_INTERFACES`; and the
    problems (a list cut short)."""
    base = sysfs_root / "class/net"
    try:
        names = os.listdir(base)
    except OSError:
        return [], []
    # Each interface is a directory (a link to its device's); `bonding_masters`, which the
    # bonding driver writes beside them, and any other file is not one.
    found = [
        iface
        for name in names
        if (base / name).is_dir() and (iface := _interface(base / name, book)) is not None
    ]
    found.sort(key=lambda i: (not i.physical, i.name))
    problems = []
    if len(found) > MAX_NETWORK_INTERFACES:
        problems.append(
            f"{len(found)} network interfaces; reporting the first {MAX_NETWORK_INTERFACES}, "
            "physical ones first"
        )
    return found[:MAX_NETWORK_INTERFACES], problems


def _interface(directory: Path, book: AddressBook) -> NetworkInterface | None:
    kind = _int(directory / "type")
    if kind == ARPHRD_LOOPBACK or directory.name == "lo":
        return None
    speed = _int(directory / "speed")  # EINVAL when down or virtual; -1 when unknown
    mac = (_text(directory / "address") or "").lower() or None
    addresses = _same(book.get(directory.name), _int(directory / "ifindex"), mac)
    return NetworkInterface(
        name=directory.name,
        kind=KINDS.get(kind, "other") if kind is not None else "other",
        state=_text(directory / "operstate") or "unknown",
        speed_mbps=speed if speed is not None and speed > 0 else None,
        mtu=_int(directory / "mtu"),
        mac=mac,
        physical=os.path.lexists(directory / "device"),
        ipv4=addresses.ipv4,
        ipv6=addresses.ipv6,
    )


def _same(entry: Addresses | None, ifindex: int | None, mac: str | None) -> Addresses:
    """The book's addresses when its interface is this one; none otherwise."""
    if entry is None or ifindex is None or entry.ifindex != ifindex:
        return Addresses()
    if entry.mac and mac and entry.mac != mac:
        return Addresses()
    return entry


def _int(path: Path) -> int | None:
    text = _text(path) or ""
    try:
        return int(text)
    except ValueError:
        return None


def _text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
