"""`astra` given several coordinators (`ASTRA_API=URL,URL`): it reaches whichever leads, passes
over refused, silent and standby ones, sends its token to no address it was not given, and
says in one sentence why none answered."""

from __future__ import annotations

import http.server
import json
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import refusing_port
from standby import Standby

from astraeus.coordinator.cli.client import Api
from astraeus.coordinator.cli.config import resolve
from astraeus.coordinator.cli.errors import CliError, Exit

from .conftest import Astra
from .rig import Coordinator


def _api(*urls: str, timeout: float = 30.0) -> Api:
    env = {"ASTRA_API": ",".join(urls), "ASTRA_TOKEN": "astr_t", "ASTRA_CONFIG": "/nonexistent"}
    return Api(resolve(api=None, token=None, workspace=None, environ=env), timeout=timeout)


def test_a_refused_first_address_passes_to_the_second(
    coordinator: Coordinator, astra: Astra, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first coordinator refuses connections (dead, restarting): the command runs on the
    second, as if it had been the only one."""
    with refusing_port() as port:
        monkeypatch.setenv("ASTRA_API", f"http://127.0.0.1:{port},{coordinator.url}")
        result = astra("astraeus", "machines")
    assert (result.code, result.err) == (0, "")


def test_a_standby_naming_the_leader_sends_astra_there_and_it_is_remembered(
    coordinator: Coordinator, astra: Astra, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A standby names the leader, which is tried next, before the others in the list; the
    command's later requests go straight to the leader (the standby sees one request)."""
    with Standby(leader=coordinator.url + "/") as standby, Standby() as other:
        urls = [standby.url, other.url, coordinator.url]
        monkeypatch.setenv("ASTRA_API", ",".join(urls))
        # `run` asks twice: POST /runs, then GET /cluster for the console link.
        member = coordinator.member("vision")
        result = astra("astraeus", "run", "--name", "hello", "--", "true", token=member)
        assert (result.code, result.err) == (0, "")
        assert result.out.startswith("hello submitted to gpu-east: ")
        assert [(s.method, s.path) for s in standby.seen] == [("POST", "/api/v1/runs")]
        assert other.seen == []


def test_a_leader_not_in_the_list_is_never_contacted(coordinator: Coordinator) -> None:
    """A standby naming an address that is not in ASTRA_API: astra does not go there (its token
    would reach whoever the standby names); the error names that address and says so."""
    with Standby() as unknown, Standby(leader=unknown.url) as standby:
        with pytest.raises(CliError) as failed:
            _api(standby.url).get("/machines")
        assert unknown.seen == []
    assert failed.value.code == Exit.UNREACHABLE
    assert failed.value.message == (
        f"the coordinator at {standby.url} is a standby naming {unknown.url} as the leader, "
        "which is not one of the configured coordinators, so it was not contacted; list every "
        "coordinator in ASTRA_API or --api, comma-separated (docs/cli.md)"
    )


@pytest.fixture
def silent() -> Iterator[int]:
    """A port that takes connections and never answers: a coordinator paused or wedged."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        taken: list[socket.socket] = []

        def accept() -> None:
            while True:
                try:
                    taken.append(server.accept()[0])
                except OSError:
                    return

        threading.Thread(target=accept, daemon=True).start()
        yield int(server.getsockname()[1])
        for connection in taken:
            connection.close()


def test_when_none_leads_one_sentence_names_each(silent: int) -> None:
    """Every address tried, and why each was passed over (refused, a standby naming a leader
    or none, no answer), in one sentence; exit 3."""
    quiet = f"http://127.0.0.1:{silent}"
    with refusing_port() as port, Standby() as unknown:
        refused = f"http://127.0.0.1:{port}"
        with Standby() as leaderless, Standby(leader=unknown.url) as misled:
            api = _api(refused, leaderless.url, misled.url, quiet, timeout=0.5)
            with pytest.raises(CliError) as failed:
                api.get("/runs")
    assert failed.value.code == Exit.UNREACHABLE
    assert failed.value.message == (
        f"no coordinator answered as the leader: {refused}: Connection refused; "
        f"{leaderless.url}: a standby; no leader is known yet; "
        f"{misled.url}: a standby naming {unknown.url} as the leader, which is not one of the "
        f"configured coordinators, so it was not contacted; "
        f"{quiet}: no answer within 0.5 s. Are they running? Point ASTRA_API or --api at them."
    )
    assert unknown.seen == []


def test_a_change_without_an_answer_is_not_sent_again(silent: int) -> None:
    """A POST that reached a coordinator which never answered may have been carried out: astra
    says so and does not send it to the next (a read is tried there)."""
    quiet = f"http://127.0.0.1:{silent}"
    with Standby() as second:
        api = _api(quiet, second.url, timeout=0.5)
        with pytest.raises(CliError) as failed:
            api.post("/runs/hello/cancel")
        assert second.seen == []
        with pytest.raises(CliError):
            api.get("/runs")
        assert [(s.method, s.path) for s in second.seen] == [("GET", "/api/v1/runs")]
    assert failed.value.message == (
        f"the coordinator at {quiet} took the request but gave no answer (no answer within "
        "0.5 s); it may have done it: look before trying again (astra sends a change to one "
        "coordinator only)"
    )


class _Busy(http.server.BaseHTTPRequestHandler):
    """A leader whose database takes no writes: 503 with Retry-After, and no leader named."""

    def do_GET(self) -> None:
        body = b'{"error": "database is not writable: disk full", "fields": []}'
        self.send_response(503)
        self.send_header("Retry-After", "5")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


class _Redirect(_Busy):
    """A server that sends every request on elsewhere (`Location` set by the test)."""

    location = ""

    def do_GET(self) -> None:
        self.send_response(307)
        self.send_header("Location", self.location)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture
def serve() -> Iterator[list[http.server.HTTPServer]]:
    servers: list[http.server.HTTPServer] = []
    yield servers
    for server in servers:
        server.shutdown()
        server.server_close()


def _start(servers: list[http.server.HTTPServer], handler: type[_Busy]) -> str:
    server = http.server.HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    servers.append(server)
    return f"http://127.0.0.1:{server.server_port}"


def test_a_busy_leader_is_not_failed_over(serve: list[http.server.HTTPServer]) -> None:
    """The leader's own 503 (database not writable, overloaded) is its answer: astra says it
    and does not go to the next coordinator."""
    busy = _start(serve, _Busy)
    with Standby() as second:
        with pytest.raises(CliError) as failed:
            _api(busy, second.url).get("/runs")
        assert second.seen == []
    assert (failed.value.code, failed.value.message) == (
        Exit.FAILED,
        "database is not writable: disk full",
    )


def test_a_redirect_is_not_followed_with_the_token(serve: list[http.server.HTTPServer]) -> None:
    """A coordinator (or something posing as one) that redirects: astra does not follow, so
    its token never reaches the address redirected to."""
    with Standby() as elsewhere:
        _Redirect.location = f"{elsewhere.url}/api/v1/runs"
        redirecting = _start(serve, _Redirect)
        with pytest.raises(CliError) as failed:
            _api(redirecting).get("/runs")
        assert elsewhere.seen == []
    assert failed.value.message == (
        f"the coordinator at {redirecting} sent this request on to {elsewhere.url}/api/v1/runs;"
        " astra sends its token only to the coordinators in ASTRA_API or --api: list that one "
        "there"
    )


@pytest.mark.parametrize(
    ("api", "message"),
    [
        pytest.param("http://127.0.0.1:1,file:///etc/passwd",
                     "api: 'file:///etc/passwd' is not an http(s) URL, e.g. "
                     "http://coordinator:8470", id="file"),
        pytest.param("https://admin:pw@coord:8470", "api: 'https://…@coord' has credentials in "
                     "it; give the token in its own setting (a token file), never in the URL",
                     id="credentials"),
        pytest.param(",".join(f"https://c{i}:8470" for i in range(500)),
                     "api: 500 addresses; at most 16 coordinators may be listed", id="500"),
        pytest.param("https://c:8470,https://C:8470/api/v1",
                     "api: 'https://C:8470' is listed twice (also as 'https://c:8470')",
                     id="twice"),
        pytest.param("https://c:8470,http://coord-b:8470",
                     "api: http://coord-b:8470 is plain http to another machine, so the token "
                     "would cross the network unencrypted; use https:// (docs/operator.md), or "
                     "--allow-plain-http (ASTRA_ALLOW_PLAIN_HTTP=1) on a network you trust",
                     id="plain-http-second"),
    ],
)  # fmt: skip
def test_a_bad_list_is_refused_before_anything_is_sent(api: str, message: str) -> None:
    """Each address of the list is checked as one would be: exit 2, the setting named."""
    with pytest.raises(CliError) as refused:
        resolve(api=api, token=None, workspace=None, environ={})
    assert (refused.value.code, refused.value.message) == (Exit.USAGE, message)


def test_the_config_file_may_list_coordinators(tmp_path: Path) -> None:
    """`api` in the config file is a comma-separated string or a TOML list."""
    path = tmp_path / "config.toml"
    path.write_text('api = ["https://a:8470", "https://b:8470/api/v1"]\n')
    target = resolve(api=None, token=None, workspace=None, environ={"ASTRA_CONFIG": str(path)})
    assert target.apis == ("https://a:8470", "https://b:8470")


def test_an_empty_list_in_the_config_file_is_refused(tmp_path: Path) -> None:
    """`api = []` names no coordinator: refused, not read as the default address."""
    path = tmp_path / "config.toml"
    path.write_text("api = []\n")
    with pytest.raises(CliError) as refused:
        resolve(api=None, token=None, workspace=None, environ={"ASTRA_CONFIG": str(path)})
    assert (refused.value.code, refused.value.message) == (
        Exit.USAGE,
        f"config file {path}: api is an empty list; name at least one coordinator",
    )


def test_coordinators_says_which_leads_and_which_stand_by(
    coordinator: Coordinator, astra: Astra, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`astra astraeus coordinators` reads each given coordinator's `/healthz` (no token): the
    leader, a standby with the leader it names, a dead address; exit 0 while one leads, 3 when
    none does. The standby is asked nothing but its health."""
    with refusing_port() as port, Standby(leader=coordinator.url) as standby:
        dead = f"http://127.0.0.1:{port}"
        monkeypatch.setenv("ASTRA_API", f"{standby.url},{dead},{coordinator.url}")
        result = astra("astraeus", "coordinators", token="")
        assert (result.code, result.err) == (0, "")
        assert [re.split(r"  +", line.strip()) for line in result.out.splitlines()] == [
            ["COORDINATOR", "ROLE", "LEADER", "EPOCH"],
            [standby.url, "standby", coordinator.url, "-"],
            [dead, "unreachable (Connection refused)", "-", "-"],
            [coordinator.url, "leader", coordinator.url, "-"],
        ]
        assert [(s.method, s.path, s.authorization) for s in standby.seen] == [
            ("GET", "/healthz", None)
        ]
        monkeypatch.setenv("ASTRA_API", f"{standby.url},{dead}")
        none = astra("astraeus", "coordinators", "-o", "json", token="")
    assert none.code == Exit.UNREACHABLE
    assert [row["role"] for row in json.loads(none.out)] == [
        "standby",
        "unreachable (Connection refused)",
    ]
