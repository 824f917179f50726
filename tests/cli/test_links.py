"""The link `astra astraeus run` prints: the guide's form, `<console_url>jobs/<cluster>/<run>`,
escaped, at the address the user typed (https on a TLS cluster) when the coordinator has no
`console_url`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from release.rig import OPENSSL, make_ca, make_server_cert

from astraeus.coordinator.cli import main
from astraeus.coordinator.cli.submit import run_link

from .conftest import Astra, Result
from .rig import Coordinator

HELLO = ["astraeus", "run", "--name", "hello", "--", "echo", "hi"]


@pytest.mark.parametrize(
    ("console_url", "expected"),
    [
        ("https://c.example/o/acme/w/vision/", "https://c.example/o/acme/w/vision/jobs/gpu-east/x"),
        ("https://c.example/console", "https://c.example/console/jobs/gpu-east/x"),
    ],
    ids=["slash", "no-slash"],
)
def test_link_is_the_guides_path_under_the_console(console_url: str, expected: str) -> None:
    """`<console_url>jobs/<cluster>/<run>`, whether or not `console_url` ends in `/`."""
    assert run_link(console_url, "gpu-east", "x") == expected


def test_link_escapes_each_name_as_one_segment() -> None:
    """Names come from the coordinator's answer, and a cluster's name is any text: should one
    hold ` `, `/`, `?` or `#`, it stays one segment and never becomes another path, a query or a
    fragment."""
    link = run_link("https://c.example/", "gpu east/2", "x?y#z")
    assert link == "https://c.example/jobs/gpu%20east%2F2/x%3Fy%23z"


@pytest.fixture
def unnamed(tmp_path: Path) -> Iterator[Coordinator]:
    """A coordinator with no `console_url`, listening on 127.0.0.1."""
    server = Coordinator(tmp_path, console_url="")
    server.start()
    yield server
    server.stop()


def _astra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> Astra:
    monkeypatch.setenv("ASTRA_CONFIG", str(tmp_path / "no-config.toml"))
    monkeypatch.delenv("ASTRA_WORKSPACE", raising=False)

    def run(*argv: str, token: str | None = None) -> Result:
        assert token is not None
        monkeypatch.setenv("ASTRA_TOKEN", token)
        capsys.readouterr()
        code = main(list(argv))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def test_without_console_url_the_link_uses_the_name_typed(
    unnamed: Coordinator,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """`ASTRA_API=http://localhost:PORT` against a coordinator listening on 127.0.0.1: the link
    is at `localhost`, the name the user typed, not the listen address."""
    token = unnamed.member("vision")
    monkeypatch.setenv("ASTRA_API", f"http://localhost:{unnamed.port}")
    result = _astra(monkeypatch, capsys, tmp_path)(*HELLO, token=token)
    assert result.code == 0, result.err
    assert result.out == (
        f"hello submitted to gpu-east: http://localhost:{unnamed.port}/console/jobs/gpu-east/hello\n"
    )


@pytest.mark.skipif(OPENSSL is None, reason="the openssl command is not installed")
def test_on_a_tls_cluster_the_link_is_https_at_the_name_typed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 30: a TLS coordinator without `console_url`, reached as
    `https://localhost:PORT` with its private CA: the link is
    `https://localhost:PORT/console/jobs/...`, not `http://127.0.0.1:PORT/...`."""
    certs = tmp_path / "certs"
    certs.mkdir()
    ca = make_ca(certs)
    cert, key = make_server_cert(certs, "server")
    server = Coordinator(tmp_path, console_url="", tls=(cert, key, ca))
    server.start()
    try:
        token = server.member("vision")
        monkeypatch.setenv("ASTRA_API", f"https://localhost:{server.port}")
        monkeypatch.setenv("ASTRA_CA", str(ca))
        result = _astra(monkeypatch, capsys, tmp_path)(*HELLO, token=token)
    finally:
        server.stop()
    assert result.code == 0, result.err
    assert result.out == (
        f"hello submitted to gpu-east: https://localhost:{server.port}/console/jobs/gpu-east/hello\n"
    )


@pytest.mark.parametrize("workspace", ["vision", "nlp"])
def test_an_admins_link_names_the_cluster_whatever_the_workspace(
    coordinator: Coordinator, astra: Astra, workspace: str
) -> None:
    """An admin submitting with `--workspace` gets the cluster's link, as a member does: the
    workspace is not in the link (the console finds it)."""
    coordinator.member(workspace)
    result = astra(*HELLO[:2], "--workspace", workspace, *HELLO[2:])
    assert result.code == 0, result.err
    assert result.out == (
        "hello submitted to gpu-east: "
        "https://console.astralyx.cloud/o/acme/w/vision/jobs/gpu-east/hello\n"
    )


@pytest.mark.skipif(OPENSSL is None, reason="the openssl command is not installed")
def test_plain_http_to_a_tls_cluster_says_try_https(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 30: `ASTRA_API=http://…` against a coordinator that serves TLS: the coordinator
    hangs up on the plain request, and astra says it may serve https and gives the URL to
    try, not "Remote end closed connection without response. Is it running?"."""
    certs = tmp_path / "certs"
    certs.mkdir()
    ca = make_ca(certs)
    cert, key = make_server_cert(certs, "server")
    server = Coordinator(tmp_path, console_url="", tls=(cert, key, ca))
    server.start()
    try:
        token = server.member("vision")
        monkeypatch.setenv("ASTRA_API", f"http://localhost:{server.port}")
        result = _astra(monkeypatch, capsys, tmp_path)("astraeus", "list", token=token)
    finally:
        server.stop()
    assert result.code == 3, result.err
    assert result.err == (
        f"astra: the coordinator at http://localhost:{server.port} answered nothing over plain "
        f"http; it may serve https: try https://localhost:{server.port} in ASTRA_API or --api\n"
    )
