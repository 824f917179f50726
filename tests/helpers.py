"""What every test folder shares: one way to wait for something to become true, and loopback
ports held for as long as a test needs them.

pytest puts `tests/` on `sys.path` (`pythonpath` in pyproject.toml), so any test or rig module
imports these as `from helpers import until`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import pytest

T = TypeVar("T")

WAIT_SECONDS = 60.0
"""How long any wait may take before the test fails saying what it waited for. Generous: only
a hang reaches it, so nothing here asserts how fast anything is."""

EVERY_SECONDS = 0.05
"""How often a wait asks again."""


def _gave_up(what: str, within: float, last: object) -> None:
    shown = repr(last)
    if len(shown) > 300:
        shown = shown[:300] + "..."
    pytest.fail(f"gave up after {within:g} s waiting for {what} (last answer: {shown})")


def until(
    what: str,
    check: Callable[[], T],
    *,
    within: float = WAIT_SECONDS,
    every: float = EVERY_SECONDS,
) -> T:
    """Ask `check()` every `every` seconds until it answers something true, and answer that;
    fail naming `what` (and the last answer) after `within` seconds. Blocks the thread: from
    a coroutine use `until_async`."""
    end = time.monotonic() + within
    while True:
        answer = check()
        if answer:
            return answer
        if time.monotonic() > end:
            _gave_up(what, within, answer)
        time.sleep(every)


async def until_async(
    what: str,
    check: Callable[[], T | Awaitable[T]],
    *,
    within: float = WAIT_SECONDS,
    every: float = EVERY_SECONDS,
) -> T:
    """`until` for a coroutine: the event loop runs on between tries. `check` may be a plain
    function or a coroutine function (its result is awaited)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + within
    while True:
        answer = check()
        if inspect.isawaitable(answer):
            answer = await answer
        if answer:
            return answer  # type: ignore[return-value]
        if loop.time() > end:
            _gave_up(what, within, answer)
        await asyncio.sleep(every)


def hold_port(port: int = 0) -> socket.socket:
    """A loopback TCP port held (`port`, or one the kernel picks): a socket bound to it on
    127.0.0.1 with SO_REUSEADDR and not listening. Programs that bind with SO_REUSEADDR (asyncio
    and aiohttp servers, `socket.create_server`) can still listen there, again and again;
    nothing else can bind it until the socket is closed. See `reserved_ports`."""
    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        held.bind(("127.0.0.1", port))
    except OSError:
        held.close()
        raise
    return held


@contextlib.contextmanager
def refusing_port() -> Iterator[int]:
    """A loopback port held, bound but not listening, for as long as the block runs: a
    connection to it is refused, and no other program can listen on it meanwhile (so it is
    never "a port that was free a moment ago")."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield int(held.getsockname()[1])


@contextlib.contextmanager
def reserved_ports(count: int, tries: int = 50) -> Iterator[int]:
    """A range of `count` consecutive loopback ports, held for as long as the block runs;
    answers the first, which the kernel chose (bind to port 0) and is always held.

    Each held port is bound on 127.0.0.1 with SO_REUSEADDR and not listening. A program that
    binds with SO_REUSEADDR itself (Python's `socket.create_server`, PyTorch's TCPStore, an
    agent checking that a rendezvous port is free) can still take it and listen there;
    another program's plain bind is refused. A port of the range that some connection uses
    right now (on a busy machine, the odd ports the kernel gives to outgoing connections,
    and their TIME_WAIT) cannot be held and is left out: an agent finds it busy and the
    coordinator gives another, as it would in production. At least half the range is held,
    so a range handed to a child process is never a guess that others may take first.
    """
    for _ in range(tries):
        with contextlib.ExitStack() as stack:
            first = int(stack.enter_context(hold_port()).getsockname()[1])
            if first + count - 1 > 65535:
                continue
            held = 1
            for port in range(first + 1, first + count):
                with contextlib.suppress(OSError):  # in use by a connection now: left out
                    stack.enter_context(hold_port(port))
                    held += 1
            if 2 * held < count:
                continue  # too busy a stretch: another first port
            yield first
            return
    raise RuntimeError(
        f"no {count} consecutive loopback ports, half of them free to hold, found in {tries} tries"
    )


class Proxy:
    """A TCP proxy on 127.0.0.1 in front of `target` (a coordinator, a database server).
    `cut` closes every connection through it and stops listening, so new ones are refused (one
    side of a partition, or a server gone); `heal` listens again on the same port."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = 0
        self._server: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.heal()

    @property
    def url(self) -> str:
        """The proxy's address as an HTTP URL (for a coordinator behind it)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def listening(self) -> bool:
        return self._server is not None

    def heal(self) -> None:
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(64)
        self.port = int(server.getsockname()[1])
        self._server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return  # closed by `cut`
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            self._close(source, sink)

    def _close(self, *sockets: socket.socket) -> None:
        with self._lock:
            for sock in sockets:
                self._open.discard(sock)
                sock.close()

    def cut(self) -> None:
        if self._server is not None:
            # A close alone leaves the thread in accept() taking connections (Linux keeps the
            # socket while a call uses it); shutdown wakes it.
            with contextlib.suppress(OSError):
                self._server.shutdown(socket.SHUT_RDWR)
            self._server.close()
            self._server = None
        with self._lock:
            found = list(self._open)
        for sock in found:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._close(*found)

    def close(self) -> None:
        self.cut()
