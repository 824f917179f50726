"""One HTTP/1.1 exchange over a socket of its own: the request sent whole, the answer read whole.

`astra`'s everyday commands make one to three requests and print; `http.client` would load the
`email` package to parse the headers (with `random`, `calendar`, `base64`, `quopri`: about as
much as the rest of `astra status` together). What a coordinator's answer needs is small: a
status line, headers (`Content-Length`, `Transfer-Encoding`, `Location`, `Astraeus-Leader`) and
a body, so it is read here over a bare socket (and, for https, the caller's `ssl` context,
which checks the certificate and the host name: plain http loads no `ssl`). Plain http uses the
C module `_socket` itself: the `socket` module around it (its enums of every constant,
`selectors`) costs a sixth of `astra status`; `ssl` needs and loads it anyway.

Failures are told apart as `client.py` needs them: `NotSentError` when no connection was made or
the request could not be sent (another coordinator may be asked); an `OSError` once it was sent
(`HungUpError` when the connection closed before any answer, `BadAnswerError` when what came
back is not HTTP)."""

from __future__ import annotations

import _socket

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` alone costs a tenth of `astra status`
    import socket
    import ssl

    Connection = _socket.socket | socket.socket

DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_HEAD = 64 * 1024
"""The most bytes of status line and headers read: a coordinator's are a few hundred."""
_CLEAN = frozenset(range(0x21, 0x7F))
"""The bytes a request target may hold (RFC 9112 §3.2: visible ASCII; the rest percent-encoded)."""


class Reply(tuple[int, str, dict[str, str], bytes]):
    """An answer, whatever its status: (status, reason, headers, body). A tuple as
    `NamedTuple` would make it, without loading `typing`."""

    __slots__ = ()

    def __new__(cls, status: int, reason: str, headers: dict[str, str], body: bytes) -> Reply:
        return super().__new__(cls, (status, reason, headers, body))

    @property
    def status(self) -> int:
        return self[0]

    @property
    def reason(self) -> str:
        return self[1]

    @property
    def headers(self) -> dict[str, str]:
        """By lower-cased name; a header given twice, its values joined by `, `."""
        return self[2]

    @property
    def body(self) -> bytes:
        return self[3]

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


class NotSentError(Exception):
    """The connection or the sending failed (`reason`): the server never saw the request."""

    def __init__(self, reason: object) -> None:
        super().__init__(reason)
        self.reason = reason


class HungUpError(ConnectionError):
    """The connection closed, or was reset, before any answer (a TLS port asked plain http)."""


class BadAnswerError(OSError):
    """What came back is not an HTTP answer, or it stopped short of its own length."""


def exchange(
    scheme: str,
    netloc: str,
    method: str,
    target: str,
    headers: dict[str, str],
    body: bytes | None,
    timeout: float,
    context: ssl.SSLContext | None = None,
) -> Reply:
    """Send `method target` to `scheme://netloc` (`context` for https) and read the answer.
    `timeout` bounds each wait (connecting, each read), as `http.client`'s does."""
    request = _request(method, target, netloc, headers, body)
    host, port = _host_port(netloc, DEFAULT_PORTS[scheme])
    try:
        # A host name as bytes: a str would make getaddrinfo load the idna codec (3 modules).
        address = host.encode("ascii") if host.isascii() else host
        sock: Connection = _connect(address, port, timeout)
    except OSError as exc:
        raise NotSentError(exc) from None
    try:
        try:
            if scheme == "https":
                if context is None:
                    raise ValueError("https needs the caller's TLS context")
                import socket  # `ssl` wraps the `socket` module's sockets only

                sock = wrapped = socket.socket(fileno=sock.detach())  # closed below if refused
                wrapped.settimeout(timeout)
                sock = context.wrap_socket(wrapped, server_hostname=host)
            sock.sendall(request)
        except OSError as exc:
            raise NotSentError(exc) from None
        return _read(sock)
    finally:
        sock.close()


def _connect(host: bytes | str, port: int, timeout: float) -> _socket.socket:
    """`socket.create_connection((host, port), timeout)` with `_socket`: each address the name
    resolves to, in turn, until one takes the connection; else the first one's error."""
    errors: list[OSError] = []
    for family, kind, proto, _name, address in _socket.getaddrinfo(
        host, port, 0, _socket.SOCK_STREAM
    ):
        sock = _socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            sock.connect(address)
        except OSError as exc:
            errors.append(exc)
            sock.close()
            continue
        return sock
    raise errors[0] if errors else OSError("getaddrinfo returns an empty list")


def _request(
    method: str, target: str, netloc: str, headers: dict[str, str], body: bytes | None
) -> bytes:
    """The request's bytes; a target or header that could split it into two is refused."""
    if not target.startswith("/") or any(b not in _CLEAN for b in target.encode()):
        raise ValueError(f"request target {target!r} is not percent-encoded")
    lines = [f"{method} {target} HTTP/1.1", f"Host: {netloc}"]
    for name, value in headers.items():
        if any(ch in value for ch in "\r\n\0"):
            raise ValueError(f"header {name} has a line break in it")
        lines.append(f"{name}: {value}")
    lines += [f"Content-Length: {len(body or b'')}", "Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1") + (body or b"")


def _host_port(netloc: str, default: int) -> tuple[str, int]:
    """`host`, `host:port`, `[v6]`, `[v6]:port` (the URL was checked: no credentials)."""
    if netloc.startswith("["):
        host, _, rest = netloc[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") else default
    host, _, port = netloc.rpartition(":") if ":" in netloc else (netloc, "", "")
    return host, int(port) if port else default


def _read(sock: Connection) -> Reply:
    received = bytearray()
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(65536)
        if not chunk:
            if not received:
                raise HungUpError("the connection closed without an answer")
            raise BadAnswerError("the answer ended inside its headers")
        received += chunk
        if len(received) > MAX_HEAD and b"\r\n\r\n" not in received[:MAX_HEAD]:
            raise BadAnswerError("the answer's headers are too long")
    head, _, rest = bytes(received).partition(b"\r\n\r\n")
    status, reason, headers = _head(head)
    if headers.get("transfer-encoding", "").lower() == "chunked":
        return Reply(status, reason, headers, _chunked(sock, rest))
    length = headers.get("content-length")
    if length is None:
        return Reply(status, reason, headers, rest + _until_closed(sock))
    if not length.isdigit():
        raise BadAnswerError(f"Content-Length {length!r}")
    return Reply(status, reason, headers, _exactly(sock, rest, int(length)))


def _head(head: bytes) -> tuple[int, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    version, _, tail = lines[0].partition(" ")
    code, _, reason = tail.partition(" ")
    if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise BadAnswerError(f"not an HTTP answer: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon:
            raise BadAnswerError(f"a header line without a colon: {line[:80]!r}")
        key = name.strip().lower()
        headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
    return int(code), reason.strip(), headers


def _until_closed(sock: Connection) -> bytes:
    data = bytearray()
    while chunk := sock.recv(65536):
        data += chunk
    return bytes(data)


def _exactly(sock: Connection, have: bytes, length: int) -> bytes:
    data = bytearray(have)
    while len(data) < length:
        chunk = sock.recv(min(65536, length - len(data)))
        if not chunk:
            raise BadAnswerError(f"the answer stopped at {len(data)} of {length} bytes")
        data += chunk
    return bytes(data[:length])


def _chunked(sock: Connection, have: bytes) -> bytes:
    """A chunked body (RFC 9112 §7.1), its trailers dropped."""
    raw = bytearray(have)
    body = bytearray()
    at = 0
    while True:
        while b"\r\n" not in raw[at:]:
            raw += _more(sock)
        line_end = raw.index(b"\r\n", at)
        size_text = bytes(raw[at:line_end]).split(b";")[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise BadAnswerError(f"a chunk size {size_text[:20]!r}") from None
        at = line_end + 2
        if size == 0:
            return bytes(body)
        while len(raw) < at + size + 2:
            raw += _more(sock)
        body += raw[at : at + size]
        at += size + 2


def _more(sock: Connection) -> bytes:
    chunk = sock.recv(65536)
    if not chunk:
        raise BadAnswerError("the answer stopped inside a chunk")
    return chunk
