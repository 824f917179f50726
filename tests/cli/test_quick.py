"""The everyday commands read without argparse (`quick.py`) exactly as argparse reads them, and
the cheap stand-ins for `urllib.parse` and `ipaddress` on their path answering as those do
(issue 29). The other way round, the output of both paths is compared in `test_light.py`."""

from __future__ import annotations

import argparse
import io
import json
import urllib.parse
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from astraeus.coordinator.cli import plainjson, quick
from astraeus.coordinator.cli.client import query_string, segment, split_url
from astraeus.coordinator.cli.main import full_args
from astraeus.coordinator.cli.parser import COMMON_FLAGS, build
from astraeus.coordinator.cli.render import NO_CONTAINER
from astraeus.shared import tls
from astraeus.shared.coordinators import CoordinatorListError, checked_url, coordinator_url
from astraeus.shared.reasons import RejectionCode
from astraeus.shared.tls import plain_http_to_another_machine


def _full(argv: list[str]) -> dict[str, Any] | int:
    """What argparse makes of `argv` (`main.full_args`), without `func`; or its exit code."""
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        found = full_args(list(argv))
    if isinstance(found, int):
        return found
    return {k: v for k, v in vars(found).items() if k != "func"}


def _quick(argv: list[str]) -> dict[str, Any] | None:
    found = quick.quick_args(argv)
    return None if found is None else {k: v for k, v in vars(found).items() if k != "func"}


READ_QUICKLY = [
    ["astraeus", "status", "train"],
    ["status", "train", "--why"],
    ["-o", "json", "status", "train"],
    ["status", "--why", "train", "-o", "json"],
    ["--api", "http://a:1", "status", "x", "--api", "http://b:2"],
    ["--workspace=w", "--token", "t", "list", "--state", "Running"],
    ["list", "--state=Pending", "--state", "Running"],
    ["logs", "train-0", "-f", "--attempt", "2"],
    ["astraeus", "logs", "--follow", "x"],
    ["machines", "--allow-plain-http", "--ca-file", "/ca.pem", "--token-file", "/t"],
    ["status", ""],
    ["status", "a b/c?d#e"],
    ["run", "--name", "n", "--gpus", "8", "--dry-run", "--", "python", "train.py", "--", "-x"],
    ["run", "--name=n", "--cpus", "0.5", "--mem", "120G", "--", "x"],
    ["run", "--cpus", "12", "--gpu-memory", "80.0", "--rdma-gbps", "1e2", "--", "x"],
    ["run", "-f", "spec.json", "--label", "a=b", "--label", "c=d", "--env", "K=V"],
    ["run", "--names", "a,b", "--names", "c", "--drive", "d=/data", "--healthy-only"],
    ["run", "--priority", "+3", "--retries", " 2 ", "--retry-on-failure", "--not-preemptible"],
    ["run", "--time-limit", "2h", "--patience", "30m", "--site", "s", "--pool", "p"],
    ["run", "--machines", "2", "--min-machines", "1", "--max-machines", "4"],
    ["run", "--gpus-per-machine", "4", "--gpu-model", "H100", "--image", "img", "--", "x"],
    ["status", "x", "--", "cmd"],
    ["machine", "gpu-01"],
    ["machine", "forget", "--yes"],
    ["machine", "--yes", "gpu-01", "-o", "json"],
]


@pytest.mark.parametrize("argv", READ_QUICKLY, ids=" ".join)
def test_read_quickly_as_argparse_reads_it(argv: list[str]) -> None:
    """Each is read by `quick.py`, into the namespace argparse makes of it."""
    found = _quick(argv)
    assert found is not None
    assert found == _full(argv)


LEFT_TO_ARGPARSE = [
    [],
    ["--help"],
    ["status", "--help"],
    ["status", "-h"],
    ["status"],
    ["status", "a", "b"],
    ["status", "x", "--bogus"],
    ["status", "x", "--wh"],  # an abbreviation argparse expands
    ["-ojson", "status", "x"],
    ["-o", "yaml", "status", "x"],
    ["-o=json", "status", "x"],
    ["status", "-x"],
    ["status", "-"],
    ["status", "x", "--why=yes"],
    ["--why", "status", "x"],
    ["astraeus", "-o", "json", "status", "x"],
    ["run", "--gpus", "two", "--", "x"],
    ["run", "--gpus", "-1", "--", "x"],
    ["run", "--name", "--", "x"],
    ["run", "--vendor", "nvidia", "--", "x"],
    ["run", "--mode", "Any", "--", "x"],
    ["run", "extra", "--", "x"],
    ["logs", "x", "--attempt", "one"],
    ["machine", "forget", "gpu-01"],
    ["cancel", "x"],
    ["demo"],
    ["validate", "spec.json"],
    ["frobnicate"],
    ["astraeus"],
    ["astraeus", "astraeus"],
]


@pytest.mark.parametrize("argv", LEFT_TO_ARGPARSE, ids=lambda argv: " ".join(argv) or "-")
def test_the_rest_is_left_to_argparse(argv: list[str]) -> None:
    """Help, errors, other commands and every form the table is not sure of: None."""
    assert quick.quick_args(argv) is None


WORDS = [
    "astraeus", "status", "list", "logs", "machines", "run", "machine", "x", "", "-o", "json",
    "forget", "--yes",
    "text", "--output", "--api", "--why", "--state", "-f", "--follow", "--attempt", "2", "--",
    "--name", "--gpus", "--cpus", "0.5", "--label", "a=b", "--dry-run", "--help", "-h",
    "--not-preemptible", "--retry-on-failure", "--wor", "--workspace=w", "--mem", "-1",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(WORDS), max_size=8))
@example(["run", "--label", "a=b", "--", "--label", "c=d"])
def test_any_command_line_read_quickly_is_read_as_argparse_reads_it(argv: list[str]) -> None:
    """Whatever `quick.py` reads, argparse reads the same way (it never reads one argparse
    refuses); the rest it leaves."""
    found = _quick(argv)
    if found is not None:
        assert found == _full(argv)


def test_the_common_flags_are_parsers() -> None:
    """`quick.COMMON` names every common flag of `parser.py`, each taking a value or not alike."""
    assert {name: flag.kind != quick.TRUE for name, flag in quick.COMMON.items()} == COMMON_FLAGS


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parsers of `parser`'s sub-commands, by name."""
    found = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(found.choices)


def test_the_everyday_commands_and_run_flags_are_parsers() -> None:
    """Every flag `quick.py` knows exists under the same name for the same field in argparse,
    and the run fields it leaves to argparse are the choice flags."""
    verbs = _subcommands(_subcommands(build())["astraeus"])
    for name, verb in quick.VERBS.items():
        actions = {opt: a for a in verbs[name]._actions for opt in a.option_strings}
        for option, flag in verb.flags.items():
            assert actions[option].dest == flag.dest, option
        positional = [a.dest for a in verbs[name]._actions if not a.option_strings]
        assert tuple(d for d in positional if d not in verb.full_only) == verb.positionals
        dests = {a.dest for a in verbs[name]._actions if a.dest != "help"}
        known = {f.dest for f in (*verb.flags.values(), *quick.COMMON.values())}
        assert dests == known | set(verb.positionals) | set(verb.full_only), name
    choices = {a.dest: a.choices for a in verbs["run"]._actions if a.choices}
    assert tuple(choices.pop("output")) == quick.OUTPUTS  # checked by quick.py itself
    assert set(choices) == set(quick.RUN_ONLY_FULL)


@given(st.text(max_size=30))
@example("a b/c?d#e%+é")
def test_segment_is_urllib_quote(name: str) -> None:
    assert segment(name) == urllib.parse.quote(name, safe="")


def test_a_name_that_is_not_utf8_is_escaped_byte_for_byte() -> None:
    """What a terminal of another encoding passes (`surrogateescape`): its bytes, escaped, where
    `urllib.parse.quote` would raise."""
    assert segment(b"caf\xe9/x".decode("utf-8", "surrogateescape")) == "caf%E9%2Fx"


@given(st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=3))
@example({"state": "a b+c", "workspace": "w&x=y"})
def test_query_string_is_urlencode(query: dict[str, str]) -> None:
    assert query_string(query) == urllib.parse.urlencode(query)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8470/api/v1/runs/x?explain=grouped",
        "https://coord.example/prefix/api/v1/runs",
        "http://[::1]:8470/api/v1/machines",
    ],
)
def test_split_url_is_urlsplit(url: str) -> None:
    parts = urllib.parse.urlsplit(url)
    assert split_url(url) == (parts.scheme, parts.netloc, f"{parts.path}?{parts.query}".rstrip("?"))


URL_PARTS = st.sampled_from(
    [
        "http", "https", "HTTP", "ftp", "://", ":", "/", "//", "127.0.0.1", "localhost", "a-b.c",
        "Host", "[::1]", "8470", "0", "99999", "65535", "/api/v1", "/api/v1/", "/x", "/.", "/..",
        "?", "#", "@", "u:p@", " ", "\n", "%20", "_", "~",
    ]
)  # fmt: skip


def _outcome(check: Any, text: str) -> str:
    try:
        return str(check(text))
    except CoordinatorListError as exc:
        return f"refused: {exc}"


@settings(max_examples=500, deadline=None)
@given(st.lists(URL_PARTS, max_size=7).map("".join))
@example("http://127.0.0.1:8470")
@example("http://a-b.c:0/x")
@example("https://h:65536/api/v1/")
@example("http://h/x/../y")
def test_coordinator_url_answers_as_urllib_parse(text: str) -> None:
    """The quick check of an address as most are written answers what the whole check does."""
    assert _outcome(coordinator_url, text) == _outcome(checked_url, text)


@settings(max_examples=500, deadline=None)
@given(st.lists(URL_PARTS, max_size=6).map("".join))
@example("http://LOCALHOST:8470/x")
@example("http://127.0.0.1:80@evil.example")
@example("http://localhost.evil.example")
def test_loopback_check_answers_as_ipaddress(url: str) -> None:
    try:
        expected = tls._plain_http_parsed(url)
    except ValueError:  # urlsplit refuses it: so does the quick check, or it says the same
        return
    assert plain_http_to_another_machine(url) == expected


def test_the_container_code_is_the_enums() -> None:
    assert RejectionCode.NO_CONTAINER_RUNTIME.value == NO_CONTAINER


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=12,
)


@given(JSON)
def test_plainjson_writes_as_json_dumps(value: object) -> None:
    assert plainjson.dumps(value) == json.dumps(value)


@given(JSON, st.sampled_from(["", " ", "\n\t", "\r\n "]))
def test_plainjson_reads_as_json_loads(value: object, space: str) -> None:
    for text in (space + json.dumps(value) + space, json.dumps(value, indent=2)):
        assert _same(plainjson.loads(text.encode()), json.loads(text.encode()))
        assert _same(plainjson.loads(text), json.loads(text))


def _same(a: object, b: object) -> bool:
    """Equal, NaN equal to NaN (JSON's `NaN` reads back as a NaN)."""
    return json.dumps(a) == json.dumps(b)


@pytest.mark.parametrize(
    "text",
    [b"", b" ", b"{", b'{"a": 1} x', b"[1,]", b'"\\ud800"', b"\xff", b"\xef\xbb\xbf{}", b"NaN",
     '{"a": 1}'.encode("utf-16"), b"\x00{}", b'{"a": 1}\x00', "\ufeff{}".encode(), b"1e999"],
)  # fmt: skip
def test_plainjson_reads_what_json_refuses_as_json_does(text: bytes) -> None:
    """The same value, or the same error in the same words."""
    assert _outcome_of(plainjson.loads, text) == _outcome_of(json.loads, text)


def _outcome_of(read: Any, text: bytes) -> str:
    try:
        return f"read: {json.dumps(read(text))}"
    except ValueError as exc:
        return f"{type(exc).__name__}: {exc}"


def test_plainjson_refuses_what_json_dumps_refuses() -> None:
    for value in ({1j: 1}, {"a": object()}, [b"bytes"]):
        with pytest.raises(TypeError) as expected:
            json.dumps(value)
        with pytest.raises(TypeError) as caught:
            plainjson.dumps(value)
        assert str(caught.value) == str(expected.value)
