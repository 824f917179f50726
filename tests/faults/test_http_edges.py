"""What an attacker's malformed HTTP gets from a real `astraeus-coordinator serve`: the
documented JSON error, never plain text or a traceback."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from .rig import PATIENT, Coordinator


def _raw(c: Coordinator, request: bytes) -> tuple[bytes, bytes]:
    with socket.create_connection(("127.0.0.1", c.port), timeout=10) as conn:
        conn.sendall(request)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return head, body


def test_a_long_url_and_an_undecodable_token_get_the_json_error(tmp_path: Path) -> None:
    """A URL past 8 KiB is refused 414 with the JSON error (aiohttp alone would answer a plain
    text 400); a bearer token that is not ASCII is an unknown token, 401 JSON, not a 500."""
    c = Coordinator(tmp_path)
    c.start(PATIENT)
    try:
        path = "/api/v1/runs?workspace=" + "w" * 9000
        head, body = _raw(
            c, f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()
        )
        assert head.startswith(b"HTTP/1.1 414 "), head
        assert b"application/json" in head
        assert json.loads(body) == {
            "error": f"the URL is {len(path)} bytes long; at most 8192",
            "fields": [],
        }
        head, body = _raw(
            c,
            b"GET /api/v1/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \xff\xfe\r\n"
            b"Connection: close\r\n\r\n",
        )
        assert head.startswith(b"HTTP/1.1 401 "), head
        assert json.loads(body)["error"].startswith("missing or unknown bearer token")
    finally:
        assert c.stop() == 0
    assert c.process is not None
    assert "Traceback" not in c.process.output
