"""The shared test helpers: `until` answers the first true answer or fails saying what it
waited for; held ports stay held."""

import socket
import time

import pytest
from helpers import refusing_port, reserved_ports, until, until_async


def test_until_answers_the_first_true_answer() -> None:
    answers = iter([None, 0, [], "third"])
    assert until("the third answer", lambda: next(answers), every=0.001) == "third"


def test_until_fails_naming_what_it_waited_for_and_the_last_answer() -> None:
    started = time.monotonic()
    with pytest.raises(pytest.fail.Exception) as failed:
        until("the moon", lambda: [], within=0.05, every=0.01)
    assert str(failed.value) == "gave up after 0.05 s waiting for the moon (last answer: [])"
    assert time.monotonic() - started >= 0.05


async def test_until_async_awaits_a_coroutine_check_and_takes_a_plain_one() -> None:
    calls: list[int] = []

    async def third_call() -> int | None:
        calls.append(1)
        return len(calls) if len(calls) == 3 else None

    assert await until_async("a third call", third_call, every=0.001) == 3
    assert await until_async("a plain answer", lambda: "plain") == "plain"
    with pytest.raises(pytest.fail.Exception, match=r"^gave up after 0\.02 s waiting for never"):
        await until_async("never", lambda: False, within=0.02, every=0.005)


def test_a_refusing_port_refuses_connections() -> None:
    with refusing_port() as port, pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_reserved_ports_are_refused_to_others_and_open_to_create_server() -> None:
    """Another program's plain bind on a port of the range fails (held here, or in use by a
    connection); a server binding with SO_REUSEADDR (as `socket.create_server` does) takes the
    first port, which is always held, and listens there."""
    with reserved_ports(3) as first:
        for port in range(first, first + 3):
            with (
                socket.socket() as other,
                pytest.raises(OSError, match="Address already in use"),
            ):
                other.bind(("127.0.0.1", port))
        with (
            socket.create_server(("127.0.0.1", first)) as server,
            socket.create_connection(("127.0.0.1", first), timeout=5),
        ):
            server.accept()[0].close()
