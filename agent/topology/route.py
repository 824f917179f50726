"""The address this machine advertises to its peers: by default the source address of its route
to the coordinator, as kubelet picks a node's IP when none is given."""

import logging
import socket
from urllib.parse import urlsplit

log = logging.getLogger(__name__)


def route_source(url: str) -> str | None:
    """The address packets from here to `url`'s host leave from: a UDP socket connected there
    and read back with getsockname (connecting a UDP socket sends nothing). None, logged, when
    there is no route or the name does not resolve."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            source = str(sock.getsockname()[0])
    except (OSError, ValueError, IndexError) as error:
        log.warning("no route to the coordinator at %s to take an address from: %s", url, error)
        return None
    return source.partition("%")[0]  # an IPv6 scope is this host's business
