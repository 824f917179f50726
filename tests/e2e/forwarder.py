"""A small TCP forwarder standing in for a reverse proxy: it accepts on 127.0.0.1 and connects to
its upstream from another loopback address, so the coordinator's TCP peer is the proxy's."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable


class Forwarder:
    """Forwards every connection to `upstream()` (asked at each connection, so the upstream may
    pick its port after the forwarder starts), from `source` (an address of this host)."""

    def __init__(self, upstream: Callable[[], tuple[str, int]], source: str) -> None:
        self.upstream, self.source = upstream, source
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.server.getsockname()[1])
        self.threads: list[threading.Thread] = []
        self._spawn(self._accept)

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        thread.start()
        self.threads.append(thread)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return  # closed
            try:
                upstream = socket.create_connection(
                    self.upstream(), source_address=(self.source, 0)
                )
            except OSError:  # the upstream is down (it stops before its agents): as a proxy
                client.close()  # would, close the client's connection and keep accepting
                continue
            self._spawn(_pump, client, upstream)
            self._spawn(_pump, upstream, client)

    def close(self) -> None:
        self.server.close()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy until either side closes, then close both."""
    with contextlib.suppress(OSError):
        while data := src.recv(65536):
            dst.sendall(data)
    for sock in (src, dst):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
