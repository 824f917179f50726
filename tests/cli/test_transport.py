"""`astra`'s HTTP exchange (`cli/transport.py`), against servers that answer in every way a
server may: lengths given or not, chunks, a connection closed early or at once, not HTTP."""

from __future__ import annotations

import socket
import threading

import pytest
from helpers import refusing_port

from astraeus.coordinator.cli.transport import (
    BadAnswerError,
    HungUpError,
    NotSentError,
    Reply,
    exchange,
)


def _serve(answer: bytes) -> tuple[int, list[bytes]]:
    """A server on loopback that reads one request, sends `answer` and closes; its port and
    the requests it read."""
    server = socket.create_server(("127.0.0.1", 0))
    seen: list[bytes] = []

    def once() -> None:
        with server:
            connection, _ = server.accept()
            with connection:
                request = b""
                while b"\r\n\r\n" not in request:
                    request += connection.recv(65536)
                head, _, body = request.partition(b"\r\n\r\n")
                length = next(
                    (int(line.split(b":")[1]) for line in head.split(b"\r\n")
                     if line.lower().startswith(b"content-length:")),
                    0,
                )  # fmt: skip
                while len(body) < length:
                    body += connection.recv(65536)
                seen.append(head + b"\r\n\r\n" + body)
                connection.sendall(answer)

    threading.Thread(target=once, daemon=True).start()
    return int(server.getsockname()[1]), seen


def _ask(answer: bytes, body: bytes | None = None) -> tuple[Reply, list[bytes]]:
    port, seen = _serve(answer)
    headers = {"Authorization": "Bearer t"}
    reply = exchange("http", f"127.0.0.1:{port}", "POST", "/api/v1/runs?x=1", headers, body, 5.0)
    return reply, seen


def test_the_request_is_http_1_1_with_its_length_and_close() -> None:
    reply, seen = _ask(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", b'{"a": 1}')
    head, _, body = seen[0].partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /api/v1/runs?x=1 HTTP/1.1"
    assert lines[1].startswith(b"Host: 127.0.0.1:")
    assert set(lines[2:]) == {
        b"Authorization: Bearer t",
        b"Content-Length: 8",
        b"Connection: close",
    }
    assert body == b'{"a": 1}'
    assert reply == (200, "OK", {"content-length": "2"}, b"{}")


@pytest.mark.parametrize(
    ("answer", "body"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", b"hello"),
        (b"HTTP/1.0 200 OK\r\n\r\nuntil it closes", b"until it closes"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nTrailer: x\r\n\r\n",
            b"hello, world",
        ),
        (b"HTTP/1.1 204 No Content\r\n\r\n", b""),
    ],
    ids=["length", "until-closed", "chunked", "no-body"],
)
def test_every_way_of_sending_a_body_is_read(answer: bytes, body: bytes) -> None:
    reply, _ = _ask(answer)
    assert reply.body == body


def test_headers_are_found_by_any_case_and_repeats_joined() -> None:
    answer = (
        b"HTTP/1.1 503 Service Unavailable\r\nAstraeus-Leader: http://b:1\r\n"
        b"Via: a\r\nvia: b\r\nContent-Length: 0\r\n\r\n"
    )
    reply, _ = _ask(answer)
    assert reply.status == 503
    assert reply.reason == "Service Unavailable"
    assert reply.header("ASTRAEUS-LEADER") == "http://b:1"
    assert reply.header("Via") == "a, b"


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (b"", HungUpError),
        (b"\x15\x03\x01\x00\x02\x02\x50", BadAnswerError),  # a TLS alert
        (b"SSH-2.0-OpenSSH_9.2\r\n\r\n", BadAnswerError),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", BadAnswerError),
        (b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", BadAnswerError),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhe", BadAnswerError),
    ],
    ids=["closed", "tls-alert", "not-http", "short", "bad-length", "short-chunk"],
)
def test_an_answer_that_is_not_whole_http_is_an_os_error(
    answer: bytes, error: type[OSError]
) -> None:
    """Sent, and no usable answer: an OSError (`client.py` may not send a change again)."""
    with pytest.raises(error):
        _ask(answer)
    assert issubclass(error, OSError)


def test_a_refused_connection_is_not_sent() -> None:
    with refusing_port() as port, pytest.raises(NotSentError) as failed:
        exchange("http", f"127.0.0.1:{port}", "GET", "/", {}, None, 5.0)
    assert isinstance(failed.value.reason, ConnectionRefusedError)


@pytest.mark.parametrize(
    ("target", "headers"),
    [
        ("/runs/a b", {}),
        ("/runs/a\r\nX-Injected: 1", {}),
        ("/runs/é", {}),
        ("/", {"Authorization": "Bearer t\r\nX-Injected: 1"}),
    ],
    ids=["space", "crlf-target", "non-ascii", "crlf-header"],
)
def test_what_could_split_the_request_is_refused_before_connecting(
    target: str, headers: dict[str, str]
) -> None:
    with refusing_port() as port, pytest.raises(ValueError, match=r"percent-encoded|line break"):
        exchange("http", f"127.0.0.1:{port}", "GET", target, headers, None, 5.0)
