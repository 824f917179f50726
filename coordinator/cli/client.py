"""A small blocking client for the coordinator's API, turning every failure into a sentence.

Given several coordinators, a request goes to the one that led last in this command, then, if
that one is refused, silent or a standby, to the next (`shared/coordinators.py` orders them),
each at most once a request. The token goes only to the addresses given: a standby's named
leader reorders them, and no redirect is followed.

A request is one connection of its own, closed after its answer (`transport.py`: the socket
module, and `ssl` only for https), so `astra status` loads neither `urllib.request` nor
`http.client` and the `email` package it parses headers with. Where a proxy is set in the
environment (`HTTPS_PROXY`, `http_proxy`, …), requests go through `urllib.request` instead,
which honours it and `NO_PROXY` as `curl` does; both ways answer alike (`Reply`), so every rule
below holds for both."""

from __future__ import annotations

import os
import sys

from astraeus.shared.coordinators import (
    LEADER_HEADER,
    Coordinators,
    Round,
    shown,
    standby_answer,
)

from .errors import CliError, Exit, refusal
from .plainjson import dumps as to_json
from .plainjson import loads as from_json
from .transport import BadAnswerError, HungUpError, NotSentError, Reply, exchange

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` and `urllib.parse` alone cost a fifth of `astra status`
    import ssl
    import urllib.request
    from collections.abc import Mapping
    from typing import Any

    from .config import Target

TIMEOUT_SECONDS = 30.0

_IN_WORKSPACE = ("/runs", "/tasks")
"""Paths that act in a workspace: an admin names it in the query."""

_STATUS_EXIT = {400: Exit.USAGE, 401: Exit.AUTH, 403: Exit.AUTH, 404: Exit.NOT_FOUND}


_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~")
"""The bytes a URL carries as they are (RFC 3986 §2.3); `urllib.parse.quote`'s always-safe."""


def segment(name: str) -> str:
    """`name` as one path segment (`/runs/<name>`): a `/`, `?` or `#` in what a user typed
    stays in the name, so it can only ever name a run, task or machine, never another path.
    `urllib.parse.quote(name, safe="")` (a test keeps the two the same), but for what a
    terminal passes that is not UTF-8 (`surrogateescape`): its bytes, escaped, not a
    traceback."""
    return _escaped(name, "")


def query_string(query: dict[str, str]) -> str:
    """`urllib.parse.urlencode(query)`: each key and value escaped, a space as `+`."""
    return "&".join(f"{_escaped(k, ' ')}={_escaped(v, ' ')}" for k, v in query.items()).replace(
        " ", "+"
    )


def _escaped(text: str, safe: str) -> str:
    """Every byte of `text` (UTF-8) but the unreserved ones and `safe` as `%XX`."""
    keep = _UNRESERVED | frozenset(safe.encode())
    data = text.encode("utf-8", "surrogateescape")
    return "".join(chr(b) if b in keep else f"%{b:02X}" for b in data)


def split_url(url: str) -> tuple[str, str, str]:
    """`scheme://netloc/target?query` as (scheme, netloc, request target): `Api.url`'s URLs,
    from a checked coordinator address (no credentials, query or fragment) and escaped
    segments."""
    scheme, _, rest = url.partition("://")
    netloc, slash, target = rest.partition("/")
    return scheme, netloc, slash + target


def proxied(environ: Mapping[str, str]) -> bool:
    """Whether the environment names a proxy (`<scheme>_proxy`, any case, as `urllib.request`
    reads them): then requests go through `urllib.request`, which follows it."""
    return any(
        value and key.lower().endswith("_proxy") and key.lower() != "no_proxy"
        for key, value in environ.items()
    )


class _Answer:
    """What the leader answered: the JSON, parsed."""

    __slots__ = ("data",)

    def __init__(self, data: Any) -> None:
        self.data = data


class _Missed:
    """One coordinator that did not answer as the leader: `why` in a list of several, `alone`
    the whole sentence when it is the only coordinator."""

    __slots__ = ("alone", "why")

    def __init__(self, why: str, alone: str) -> None:
        self.why = why
        self.alone = alone


class Api:
    """Calls `/api/v1/...` with the bearer token; answers parsed JSON or raises `CliError`."""

    def __init__(self, target: Target, timeout: float = TIMEOUT_SECONDS) -> None:
        self.target = target
        self.timeout = timeout
        self.coordinators = Coordinators(target.apis)
        self.answers = 0
        """How many answers were read: `dispatch` tells an answer it cannot read from a fault
        of its own by it."""
        self._context: ssl.SSLContext | None = None
        self._openers: dict[bool, urllib.request.OpenerDirector] = {}
        self._proxied = proxied(os.environ)

    def tls(self) -> ssl.SSLContext:
        """For https: the CA file's or the system's trust, built once."""
        from astraeus.shared.tls import CaFileError, client_context  # `ssl`: https only

        if self._context is None:
            try:
                self._context = client_context(self.target.ca_file, "ASTRA_CA or --ca-file")
            except CaFileError as exc:
                raise CliError(str(exc), Exit.USAGE) from None
        return self._context

    def opener(self, base: str) -> urllib.request.OpenerDirector:
        """`urllib.request`'s, for https with `tls()`, following the environment's proxy and
        never a redirect; for `coordinators` and behind a proxy."""
        import urllib.request  # only behind a proxy, and for `coordinators`

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            """A redirect is answered as the error it is to `astra`: following it would send
            the token to an address the user did not give."""

            def redirect_request(self, *_args: Any, **_kwargs: Any) -> None:
                return None

        secure = base.startswith("https://")
        if secure not in self._openers:
            handlers: list[urllib.request.BaseHandler] = [NoRedirect()]
            if secure:
                handlers.append(urllib.request.HTTPSHandler(context=self.tls()))
            self._openers[secure] = urllib.request.build_opener(*handlers)
        return self._openers[secure]

    def url(self, path: str, query: dict[str, str] | None = None, base: str | None = None) -> str:
        tail = f"?{query_string(query)}" if query else ""
        return f"{base or self.coordinators.current}/api/v1{path}{tail}"

    def get(self, path: str, **query: str | None) -> Any:
        return self.call("GET", path, query=query)

    def post(self, path: str, body: Any = None, **query: str | None) -> Any:
        return self.call("POST", path, body, query=query)

    def put(self, path: str, body: Any) -> Any:
        return self.call("PUT", path, body)

    def delete(self, path: str) -> Any:
        return self.call("DELETE", path)

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, str | None] | None = None,
    ) -> Any:
        if not self.target.token:
            raise CliError(
                'no API token: set ASTRA_TOKEN, pass --token, or write token = "..." in '
                f"{self.target.config}",
                Exit.AUTH,
            )
        if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in self.target.token):
            raise CliError(
                "the API token has a line break or another control character in it: check "
                "ASTRA_TOKEN, --token, the token file or the config file",
                Exit.USAGE,
            )
        kept = {k: v for k, v in (query or {}).items() if v is not None}
        if self.target.workspace and path.startswith(_IN_WORKSPACE) and "workspace" not in kept:
            kept["workspace"] = self.target.workspace
        data = None if body is None else to_json(body).encode()
        attempt = self.coordinators.round()
        missed: _Missed | None = None
        while (base := attempt.next()) is not None:
            sent = self._send(attempt, base, method, self.url(path, kept, base), data)
            if isinstance(sent, _Answer):
                self.answers += 1
                return sent.data
            missed = sent
        raise self._none_answered(attempt, missed)

    def _send(
        self, attempt: Round, base: str, method: str, url: str, data: bytes | None
    ) -> _Answer | _Missed:
        """One try at `base`: its answer as the leader, else why it is passed over (recorded in
        `attempt`). A refusal (4xx, or a 5xx that is not a standby's) is raised: it is the
        leader's answer."""
        headers = {
            "Authorization": f"Bearer {self.target.token}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": "astra",
        }
        try:
            reply = self._exchange(base, method, url, data, headers)
        except NotSentError as exc:  # before the request was sent: safe to try another
            return self._unreachable(attempt, base, exc.reason)
        except OSError as exc:  # sent, and no answer came
            if method != "GET" and len(self.coordinators.urls) > 1:
                raise CliError(
                    f"the coordinator at {base} took the request but gave no answer "
                    f"({_reason(exc, self.timeout)}); it may have done it: look before trying "
                    "again (astra sends a change to one coordinator only)",
                    Exit.UNREACHABLE,
                ) from None
            return self._unreachable(attempt, base, exc)
        if not 200 <= reply.status < 300:
            standby = standby_answer(reply.status, reply.header(LEADER_HEADER), reply.body)
            if standby is None:
                attempt.answered(base)
                raise self._refused(reply, base)
            why = attempt.standby(base, standby)
            return _Missed(why, f"the coordinator at {base} is {why}; {_ADD_THE_LEADER}")
        attempt.answered(base)
        try:
            return _Answer(from_json(reply.body) if reply.body else None)
        except (ValueError, RecursionError):  # not JSON, or nested past what Python reads
            raise self.not_the_api(base) from None

    def _exchange(
        self, base: str, method: str, url: str, data: bytes | None, headers: dict[str, str]
    ) -> Reply:
        """Send one request on a connection of its own and read the whole answer. Raises
        `NotSentError` when it could not be sent (no connection, a certificate not trusted), an
        `OSError` when it was sent and no answer came."""
        if self._proxied:
            return self._through_urllib(base, method, url, data, headers)
        scheme, netloc, target = split_url(url)
        context = self.tls() if scheme == "https" else None
        return exchange(scheme, netloc, method, target, headers, data, self.timeout, context)

    def _through_urllib(
        self, base: str, method: str, url: str, data: bytes | None, headers: dict[str, str]
    ) -> Reply:
        """`_exchange` through `urllib.request`, which follows the environment's proxy."""
        import http.client
        import urllib.error
        import urllib.request

        request = urllib.request.Request(  # noqa: S310 - the scheme is checked in config.resolve
            url, data=data, method=method, headers=headers
        )
        try:
            with self.opener(base).open(request, timeout=self.timeout) as response:
                body = response.read()
                return Reply(response.status, response.reason, _lower(response.headers), body)
        except urllib.error.HTTPError as exc:
            return Reply(exc.code, str(exc.reason), _lower(exc.headers), exc.read())
        except urllib.error.URLError as exc:
            raise NotSentError(exc.reason) from None
        except http.client.HTTPException as exc:  # not an OSError: said as one
            raise BadAnswerError(str(exc) or type(exc).__name__) from None

    def _unreachable(self, attempt: Round, base: str, reason: object) -> _Missed:
        ssl = sys.modules.get("ssl")  # not loaded: no TLS was tried, so no certificate failed
        if ssl is not None and isinstance(reason, ssl.SSLCertVerificationError):
            why = f"a certificate this machine does not trust ({reason.verify_message})"
            alone = f"the coordinator at {base} has {why}; name its CA with --ca-file or ASTRA_CA"
        elif base.startswith("http://") and isinstance(reason, _HUNG_UP):
            # A TLS port reads plain http as a failed handshake and hangs up without a word.
            why = "answered nothing over plain http; it may serve https"
            alone = (
                f"the coordinator at {base} {why}: try {'https://' + base.removeprefix('http://')}"
                " in ASTRA_API or --api"
            )
        else:
            why = _reason(reason, self.timeout)
            alone = (
                f"cannot reach the coordinator at {base}: {why}. "
                "Is it running? Point ASTRA_API or --api at it."
            )
        attempt.failed(base, why)
        return _Missed(why, alone)

    def _none_answered(self, attempt: Round, missed: _Missed | None) -> CliError:
        if len(self.coordinators.urls) == 1 and missed is not None:
            return CliError(missed.alone, Exit.UNREACHABLE)
        return CliError(
            f"no coordinator answered as the leader: {attempt.summary()}. Are they running? "
            "Point ASTRA_API or --api at them.",
            Exit.UNREACHABLE,
        )

    def not_the_api(self, base: str | None = None) -> CliError:
        """What to say when the answer is not the coordinator's JSON (a proxy, another server)."""
        return CliError(
            f"{base or self.coordinators.current} answered, but not as an Astraeus coordinator; "
            "check ASTRA_API or --api",
            Exit.UNREACHABLE,
        )

    def _refused(self, reply: Reply, base: str) -> CliError:
        if 300 <= reply.status < 400:
            where = reply.header("Location") or "elsewhere"
            return CliError(
                f"the coordinator at {base} sent this request on to {shown(where)}; astra sends "
                "its token only to the coordinators in ASTRA_API or --api: list that one there",
                Exit.UNREACHABLE,
            )
        try:
            data = from_json(reply.body or b"{}")
        except (ValueError, RecursionError):  # `json.JSONDecodeError` is a ValueError
            data = {}
        if not isinstance(data, dict):
            data = {}
        error = str(data.get("error") or reply.reason)
        if reply.status == 401:
            return CliError(
                f"the coordinator at {base} does not know this token ({error}). "
                "Check ASTRA_TOKEN or --token.",
                Exit.AUTH,
            )
        fields = [
            (field.get("field"), field.get("problem"))
            for field in data.get("fields") or []
            if isinstance(field, dict)
        ]
        return CliError(refusal(error, fields), _STATUS_EXIT.get(reply.status, Exit.FAILED))


_HUNG_UP = (HungUpError, BadAnswerError, ConnectionResetError)
"""A connection taken, then closed or reset before any answer, or answered with what is not
HTTP (a TLS port's alert)."""


def _lower(headers: Any) -> dict[str, str]:
    """`urllib`'s headers by lower-cased name, as `transport.Reply` keeps them."""
    found: dict[str, str] = {}
    for name, value in headers.items():
        key = name.lower()
        found[key] = f"{found[key]}, {value}" if key in found else value
    return found


_ADD_THE_LEADER = "list every coordinator in ASTRA_API or --api, comma-separated (docs/cli.md)"


def _reason(reason: object, timeout: float) -> str:
    """Why a coordinator could not be reached, in a few words."""
    if isinstance(reason, TimeoutError):  # `socket.timeout` is TimeoutError
        return f"no answer within {timeout:g} s"
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return str(reason) or type(reason).__name__
