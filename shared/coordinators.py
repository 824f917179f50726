"""Several coordinator addresses: which one to try, in what order, and what a standby said.

Agents and `astra` may be given every coordinator of a cluster (`URL[,URL…]`). One leads; the
others are standbys that answer every `/api/...` request 503 with `Retry-After` and the
leader's URL (`Astraeus-Leader`, and `leader` in the JSON body). A client tries the coordinator
that led last time first, then the one a standby named, then the rest in the order given, each
at most once a round. The named leader only reorders the list: a client sends its token to the
addresses it was given and to no other (docs/security.md), so a standby naming an address not in
the list is reported, never contacted."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` and `urllib.parse`: a fifth of `astra status`, which loads this
    from collections.abc import Sequence
    from typing import Any

MAX_COORDINATORS = 16
"""The most addresses a list may hold: a cluster runs a leader and a few standbys."""
MAX_URL_LENGTH = 2048
API_PATH = "/api/v1"
LEADER_HEADER = "Astraeus-Leader"
"""The header in which a standby names the leader's URL (absent while none is known)."""
SHOWN_LENGTH = 200
"""The most of a standby's leader hint a message repeats (the standby may be anyone's)."""

_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_HOST = _LETTERS | frozenset(".-")
"""What a host name written as most are (lower case) is made of: the quick check's."""
_PATH = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ/._~-") | _LETTERS
"""What a plain path prefix (a proxy's) may hold."""
_UNPRINTABLE = {code: f"\\x{code:02x}" for code in (*range(0x21), *range(0x7F, 0xA0))}
"""Spaces and control characters, to their escapes (`str.translate`'s table: no `re`, which
loads `enum`, into `astra status`)."""
DEFAULT_PORTS = {"http": 80, "https": 443}


class CoordinatorListError(ValueError):
    """An address list that cannot be used; the text names the address and what is wrong."""


def parse_coordinators(raw: Any) -> tuple[str, ...]:
    """`URL[,URL…]` (or a list of them, from TOML) as clean URLs: spaces stripped, a trailing
    `/` or `/api/v1` dropped. Refused: an address that is not http(s)://host[:port][/prefix],
    one carrying credentials, a query or a fragment, an address listed twice, an empty list,
    more than `MAX_COORDINATORS`."""
    items = raw if isinstance(raw, list | tuple) else [raw]
    if not all(isinstance(item, str) for item in items):
        raise CoordinatorListError(f"{raw!r} is not a URL or a list of URLs")
    parts = [part.strip() for item in items for part in item.split(",")]
    urls = [part for part in parts if part]
    if not urls:
        raise CoordinatorListError(f"{raw!r} names no coordinator; give URL[,URL…]")
    if len(urls) > MAX_COORDINATORS:
        raise CoordinatorListError(
            f"{len(urls)} addresses; at most {MAX_COORDINATORS} coordinators may be listed"
        )
    clean = [coordinator_url(url) for url in urls]
    seen: dict[tuple[str, str, int], str] = {}
    for url in clean if len(clean) > 1 else ():  # one address is never listed twice
        key = endpoint(url)
        if key in seen:
            raise CoordinatorListError(f"{url!r} is listed twice (also as {seen[key]!r})")
        seen[key] = url
    return tuple(clean)


def coordinator_url(text: str) -> str:
    """One address, checked: scheme http or https, a host, maybe a port and a plain path prefix
    (a proxy's), nothing else. The same as `checked_url` (a property test keeps them so): an
    address as most are written (`http://127.0.0.1:8470`, `https://coord.example/api/v1`) is
    checked here without `urllib.parse`, any other the whole way."""
    scheme, sep, rest = text.partition("://")
    netloc, slash, tail = rest.partition("/")
    host, colon, port = netloc.partition(":")
    simple = (
        scheme in DEFAULT_PORTS
        and sep
        and len(text) <= MAX_URL_LENGTH
        and host[:1] in _LETTERS
        and _HOST.issuperset(host)
        and (not colon or (0 < len(port) <= 5 and port.isascii() and port.isdigit()))
        and (not colon or 0 < int(port) <= 65535)
        and _PATH.issuperset(tail)
    )
    path = (slash + tail).rstrip("/").removesuffix(API_PATH).rstrip("/")
    if simple and _plain_prefix(path):
        return f"{scheme}://{netloc}{path}"
    return checked_url(text)


def _plain_prefix(path: str) -> bool:
    segments = path.split("/")
    return _PATH.issuperset(path) and "//" not in path and not {".", ".."} & set(segments)


def checked_url(text: str) -> str:
    """`coordinator_url` for any text, with `urllib.parse`."""
    from urllib.parse import urlsplit

    if len(text) > MAX_URL_LENGTH:
        raise CoordinatorListError(
            f"an address of {len(text)} characters; at most {MAX_URL_LENGTH}"
        )
    if text != text.translate(_UNPRINTABLE):
        raise CoordinatorListError(f"{text!r} has spaces or control characters in it")
    parts = urlsplit(text)
    if parts.scheme.lower() not in DEFAULT_PORTS or not parts.hostname:
        raise CoordinatorListError(f"{text!r} is not an http(s) URL")
    if parts.username is not None or parts.password is not None:
        # Not repeated: the message may reach a log, and the password with it.
        where = f"{parts.scheme}://…@{parts.hostname}"
        raise CoordinatorListError(
            f"{where!r} has credentials in it; give the token in its own setting (a token "
            "file), never in the URL"
        )
    try:
        valid_port = parts.port != 0
    except ValueError:
        valid_port = False
    if not valid_port:
        raise CoordinatorListError(f"{text!r} has no valid port (1 to 65535)")
    if parts.query or parts.fragment or text.endswith(("?", "#")):
        raise CoordinatorListError(f"{text!r} has a query or fragment; give scheme://host:port")
    path = parts.path.rstrip("/").removesuffix(API_PATH).rstrip("/")
    if not _plain_prefix(path):
        raise CoordinatorListError(f"{text!r} has a path that is not a plain prefix")
    return f"{parts.scheme.lower()}://{parts.netloc}{path}"


def endpoint(url: str) -> tuple[str, str, int]:
    """What makes two addresses the same coordinator: scheme, host (any case, no final dot) and
    port (the scheme's default when none is given). Raises ValueError for a bad port."""
    from urllib.parse import urlsplit  # a standby's answer only

    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").rstrip(".").lower()
    return scheme, host, parts.port or DEFAULT_PORTS.get(scheme, 0)


def shown(text: str) -> str:
    """Text from another party (a standby's leader hint) fit for a message or a log line: every
    space or control character escaped, at most `SHOWN_LENGTH` characters."""
    escaped = text.translate(_UNPRINTABLE)
    return escaped if len(escaped) <= SHOWN_LENGTH else escaped[:SHOWN_LENGTH] + "…"


class Standby:
    """A standby's answer: the leader it named (as it named it, shown), or None. (Plain classes
    here, not dataclasses or `NamedTuple`: `astra status` loads this module, and `dataclasses`
    loads `inspect`, `NamedTuple` `typing`.)"""

    __slots__ = ("leader",)

    def __init__(self, leader: str | None) -> None:
        self.leader = leader

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Standby) and other.leader == self.leader

    def __hash__(self) -> int:
        return hash(self.leader)

    def __repr__(self) -> str:
        return f"Standby(leader={self.leader!r})"


def standby_answer(status: int, leader_header: str | None, body: bytes | str) -> Standby | None:
    """The answer as a standby's, or None for any other (a leader's, including its own 503 while
    overloaded or while its database takes no writes: those are waited out, not failed over). A
    standby's 503 names the leader in `Astraeus-Leader` or has a `leader` key in its body."""
    if status != 503:
        return None
    import json  # a standby's answer only

    try:
        data = json.loads(body) if body else None
    except (json.JSONDecodeError, UnicodeDecodeError):
        data = None
    in_body = isinstance(data, dict) and "leader" in data
    if leader_header is None and not in_body:
        return None
    named = leader_header or (data["leader"] if isinstance(data, dict) else None)
    return Standby(shown(named) if isinstance(named, str) and named else None)


class Coordinators:
    """The configured addresses, and which of them answered as the leader last."""

    def __init__(self, urls: tuple[str, ...], leader: str | None = None) -> None:
        self.urls = urls
        self.leader = leader

    def __repr__(self) -> str:
        return f"Coordinators(urls={self.urls!r}, leader={self.leader!r})"

    @classmethod
    def of(cls, raw: str | Sequence[str]) -> Coordinators:
        return cls(parse_coordinators(raw if isinstance(raw, str) else list(raw)))

    @property
    def current(self) -> str:
        """The address the next round tries first."""
        return self.leader or self.urls[0]

    def find(self, named: str) -> str | None:
        """The configured address that is the coordinator `named` names, else None."""
        try:
            key = endpoint(named)
        except ValueError:
            return None
        return next((url for url in self.urls if endpoint(url) == key), None)

    def round(self) -> Round:
        return Round(self)


class Round:
    """One try to reach the leader: every configured address at most once, the last leader
    first, then the one a standby named (when it is configured), then the rest in order."""

    def __init__(self, coordinators: Coordinators) -> None:
        self.coordinators = coordinators
        self.failures: list[tuple[str, str]] = []
        """(address, why) for each address that did not answer as the leader, in order."""
        self._tried: set[str] = set()
        self._named: str | None = None

    def next(self) -> str | None:
        """The next address to try; None when every one has been tried."""
        order = [self._named, self.coordinators.leader, *self.coordinators.urls]
        found = next((url for url in order if url is not None and url not in self._tried), None)
        if found is not None:
            self._tried.add(found)
        return found

    def failed(self, url: str, why: str) -> None:
        """`url` did not answer (refused, timed out, not trusted): `why` says which."""
        self.failures.append((url, why))

    def standby(self, url: str, answer: Standby) -> str:
        """`url` is a standby: the leader it names goes next if it is configured. Returns why
        `url` was passed over, as the failure recorded."""
        if answer.leader is None:
            why = "a standby; no leader is known yet"
        elif (known := self.coordinators.find(answer.leader)) is not None:
            why = f"a standby; the leader is {known}"
            self._named = known
        else:
            why = (
                f"a standby naming {answer.leader} as the leader, which is not one of the "
                "configured coordinators, so it was not contacted"
            )
        self.failures.append((url, why))
        return why

    def answered(self, url: str) -> bool:
        """`url` answered, not as a standby: it leads (or is the only coordinator). True when
        that is news: another address led before, or none had answered yet."""
        changed = self.coordinators.leader != url
        self.coordinators.leader = url
        return changed

    def summary(self) -> str:
        """Every address tried and why each was passed over, in one sentence's tail."""
        return "; ".join(f"{url}: {why}" for url, why in self.failures)
