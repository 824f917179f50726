"""Several coordinator addresses (`shared/coordinators.py`): the list both clients read, the
order they try it in, and how a standby's answer is told from a leader's."""

from __future__ import annotations

import json

import pytest

from astraeus.shared.coordinators import (
    MAX_COORDINATORS,
    CoordinatorListError,
    Coordinators,
    Standby,
    parse_coordinators,
    standby_answer,
)

A, B, C = "https://coord-a:8470", "https://coord-b:8470", "https://coord-c:8470"


@pytest.mark.parametrize(
    ("raw", "urls"),
    [
        pytest.param("https://c:8470", ("https://c:8470",), id="one"),
        pytest.param(f" {A} ,{B}/ , ", (A, B), id="spaces-and-slashes"),
        pytest.param(f"{A}/api/v1,{B}/api/v1/", (A, B), id="api-path"),
        pytest.param([A, f"{B},{C}"], (A, B, C), id="toml-list"),
        pytest.param("HTTPS://Coord:8470/proxy/astraeus", ("https://Coord:8470/proxy/astraeus",),
                     id="prefix"),
        pytest.param("http://[::1]:8470", ("http://[::1]:8470",), id="ipv6"),
    ],
)  # fmt: skip
def test_a_list_is_read(raw: str | list[str], urls: tuple[str, ...]) -> None:
    """`URL[,URL…]` becomes clean URLs in the order given: spaces, a final `/` and `/api/v1`
    dropped, the scheme in lower case."""
    assert parse_coordinators(raw) == urls


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        pytest.param("file:///etc/passwd", "'file:///etc/passwd' is not an http(s) URL",
                     id="file"),
        pytest.param("coord:8470", "'coord:8470' is not an http(s) URL", id="no-scheme"),
        pytest.param("https://", "'https://' is not an http(s) URL", id="no-host"),
        pytest.param(f"{A},gopher://x", "'gopher://x' is not an http(s) URL", id="second-bad"),
        pytest.param("https://admin:s3cret@coord:8470",
                     "'https://…@coord' has credentials in it; give the token in its own "
                     "setting (a token file), never in the URL", id="credentials"),
        pytest.param("https://tok@coord", "'https://…@coord' has credentials in it; give the "
                     "token in its own setting (a token file), never in the URL", id="user"),
        pytest.param("https://c:99999", "'https://c:99999' has no valid port (1 to 65535)",
                     id="port-range"),
        pytest.param("https://c:0", "'https://c:0' has no valid port (1 to 65535)", id="port-0"),
        pytest.param("https://c/?x=1", "'https://c/?x=1' has a query or fragment; give "
                     "scheme://host:port", id="query"),
        pytest.param("https://c#top", "'https://c#top' has a query or fragment; give "
                     "scheme://host:port", id="fragment"),
        pytest.param("https://c/../admin", "'https://c/../admin' has a path that is not a "
                     "plain prefix", id="dot-dot"),
        pytest.param("https://c/a;b", "'https://c/a;b' has a path that is not a plain prefix",
                     id="path-junk"),
        pytest.param("https://c\x1b[2J", "'https://c\\x1b[2J' has spaces or control "
                     "characters in it", id="control"),
        pytest.param(f"{A},{B},https://COORD-A:8470/",
                     "'https://COORD-A:8470' is listed twice (also as 'https://coord-a:8470')",
                     id="twice"),
        pytest.param("http://c,http://c:80", "'http://c:80' is listed twice (also as "
                     "'http://c')", id="default-port-twice"),
        pytest.param(" , ", "' , ' names no coordinator; give URL[,URL…]", id="empty"),
        pytest.param(",".join(f"https://c{i}" for i in range(500)),
                     f"500 addresses; at most {MAX_COORDINATORS} coordinators may be listed",
                     id="500-entries"),
        pytest.param("https://" + "c" * 3000, "an address of 3008 characters; at most 2048",
                     id="too-long"),
        pytest.param([A, 7], f"['{A}', 7] is not a URL or a list of URLs", id="not-text"),
    ],
)  # fmt: skip
def test_a_bad_list_is_refused_naming_the_address(raw: object, message: str) -> None:
    """Anything but http(s)://host[:port][/prefix], each once, at most 16: refused with a
    sentence naming the address (a password in it is not repeated)."""
    with pytest.raises(CoordinatorListError) as refused:
        parse_coordinators(raw)
    assert str(refused.value) == message
    assert "s3cret" not in str(refused.value)


def _tried(coordinators: Coordinators, standbys: dict[str, Standby]) -> list[str]:
    """The addresses one round tries when every one in `standbys` answers as that standby and
    every other is refused."""
    attempt, order = coordinators.round(), []
    while (url := attempt.next()) is not None:
        order.append(url)
        if url in standbys:
            attempt.standby(url, standbys[url])
        else:
            attempt.failed(url, "refused")
    return order


def test_the_order_is_the_last_leader_then_the_named_one_then_the_rest() -> None:
    """A round tries the last leader first, then the leader a standby named (when it is one of
    the list, matched by scheme, host and port), then the others in order, each once."""
    coordinators = Coordinators((A, B, C))
    assert _tried(coordinators, {}) == [A, B, C]
    assert _tried(coordinators, {A: Standby("https://COORD-C:8470/")}) == [A, C, B]
    coordinators.round().answered(B)
    assert coordinators.current == B
    assert _tried(coordinators, {B: Standby(A)}) == [B, A, C]
    assert _tried(coordinators, {B: Standby(None)}) == [B, A, C]


def test_a_leader_not_in_the_list_is_named_never_tried() -> None:
    """A standby naming an address not configured (another port, another host) changes
    nothing in the order; the round's summary names it and says it was not contacted."""
    coordinators = Coordinators((A, B))
    evil = "https://coord-a:9999"
    attempt = coordinators.round()
    first = attempt.next()
    assert first == A
    attempt.standby(A, Standby(evil))
    assert [attempt.next(), attempt.next()] == [B, None]
    attempt.failed(B, "Connection refused")
    assert attempt.summary() == (
        f"{A}: a standby naming {evil} as the leader, which is not one of the configured "
        f"coordinators, so it was not contacted; {B}: Connection refused"
    )


def test_answering_as_the_leader_is_remembered_and_news_once() -> None:
    """The address that answered is tried first from then on; `answered` says whether that
    changed, so a client logs a switch once."""
    coordinators = Coordinators((A, B))
    assert coordinators.round().answered(B) is True
    assert coordinators.round().answered(B) is False
    assert coordinators.round().answered(A) is True
    assert coordinators.current == A


def _standby_body(leader: str | None) -> bytes:
    named = leader or "not known"
    error = f"this coordinator is a standby; the leader is {named}"
    return json.dumps({"error": error, "fields": [], "leader": leader}).encode()


@pytest.mark.parametrize(
    ("status", "header", "body", "answer"),
    [
        pytest.param(503, B, _standby_body(B), Standby(B), id="standby"),
        pytest.param(503, None, _standby_body(None), Standby(None), id="no-leader-known"),
        pytest.param(503, None, _standby_body(B), Standby(B), id="body-only"),
        pytest.param(503, None, b'{"error": "database is not writable: disk full", "fields": []}',
                     None, id="database-not-writable"),
        pytest.param(503, None, b'{"error": "the coordinator is overloaded", "fields": []}', None,
                     id="overloaded"),
        pytest.param(503, None, b"<html>bad gateway</html>", None, id="a-proxy-page"),
        pytest.param(401, B, _standby_body(B), None, id="not-503"),
        pytest.param(503, "https://x\x1b]0;pwned\x07", b"", Standby("https://x\\x1b]0;pwned\\x07"),
                     id="hostile-hint"),
        pytest.param(503, "https://" + "x" * 500, b"", Standby("https://" + "x" * 192 + "…"),
                     id="long-hint"),
    ],
)  # fmt: skip
def test_a_standby_is_told_from_a_leader_that_is_busy(
    status: int, header: str | None, body: bytes, answer: Standby | None
) -> None:
    """Only a 503 naming a leader (the header, or `leader` in the body, even null) is a
    standby's: a leader's own 503 (overloaded, database not writable) is waited out, not failed
    over. The named leader is kept printable and short."""
    assert standby_answer(status, header, body) == answer
