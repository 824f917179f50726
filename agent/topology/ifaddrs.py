"""The addresses of this network namespace's interfaces, from the C library's `getifaddrs` (what
`ip addr` shows): for each interface its index, hardware address, IPv4 and IPv6 addresses.

The agent's workers run in this namespace, so these are the addresses NCCL and a rendezvous will
see. Link-local IPv6 addresses are left out: they need a scope and route nowhere."""

import ctypes
import ctypes.util
import functools
import ipaddress
import logging
import socket
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

AF_PACKET = 17


@dataclass
class Addresses:
    ifindex: int | None = None
    mac: str | None = None
    ipv4: list[str] = field(default_factory=list)
    ipv6: list[str] = field(default_factory=list)


AddressBook = dict[str, Addresses]


class _Ifaddrs(ctypes.Structure):
    pass


_Ifaddrs._fields_ = [
    ("ifa_next", ctypes.POINTER(_Ifaddrs)),
    ("ifa_name", ctypes.c_char_p),
    ("ifa_flags", ctypes.c_uint),
    ("ifa_addr", ctypes.c_void_p),
    ("ifa_netmask", ctypes.c_void_p),
    ("ifa_ifu", ctypes.c_void_p),
    ("ifa_data", ctypes.c_void_p),
]


@functools.cache
def _libc() -> ctypes.CDLL:
    """The C library, found once: `find_library` runs `ldconfig -p` in a child process, which
    cost more CPU than all the rest of a scan when it ran every scan."""
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def live_addresses() -> AddressBook:
    """Every interface's addresses now; empty (with a log line) where getifaddrs is missing."""
    try:
        libc = _libc()
        head = ctypes.POINTER(_Ifaddrs)()
        if libc.getifaddrs(ctypes.byref(head)) != 0:
            raise OSError(ctypes.get_errno(), "getifaddrs failed")
    except (OSError, AttributeError) as exc:
        log.warning("interface addresses unavailable: %s", exc)
        return {}
    try:
        return _walk(head)
    finally:
        libc.freeifaddrs(head)


def _walk(head: "ctypes._Pointer[_Ifaddrs]") -> AddressBook:
    book: AddressBook = {}
    node = head
    while node:
        entry = node.contents
        if entry.ifa_name and entry.ifa_addr:
            _add(book.setdefault(entry.ifa_name.decode(), Addresses()), entry.ifa_addr)
        node = entry.ifa_next
    return book


def _add(addresses: Addresses, sockaddr: int) -> None:
    family = ctypes.c_ushort.from_address(sockaddr).value
    if family == socket.AF_INET:
        addresses.ipv4.append(str(ipaddress.IPv4Address(ctypes.string_at(sockaddr + 4, 4))))
    elif family == socket.AF_INET6:
        address = ipaddress.IPv6Address(ctypes.string_at(sockaddr + 8, 16))
        if not address.is_link_local:
            addresses.ipv6.append(str(address))
    elif family == AF_PACKET:  # struct sockaddr_ll: ifindex at 4, halen at 11, addr at 12
        addresses.ifindex = ctypes.c_int.from_address(sockaddr + 4).value
        length = ctypes.c_ubyte.from_address(sockaddr + 11).value
        raw = ctypes.string_at(sockaddr + 12, min(length, 8))
        addresses.mac = ":".join(f"{b:02x}" for b in raw) if raw else None
