"""Failures are one clear sentence on stderr with a meaningful exit code, never a traceback."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import refusing_port

from astraeus.coordinator.cli.config import resolve
from astraeus.coordinator.cli.errors import CliError, Exit

from .conftest import Astra
from .rig import Coordinator

ASTRA = Path(sys.executable).parent / "astra"


def _astra(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ASTRA_")}
    return subprocess.run(
        [ASTRA, *argv], capture_output=True, text=True, check=False, env=clean | env
    )


def test_unreachable_coordinator_is_a_sentence_and_exit_3(tmp_path: Path) -> None:
    """Nothing listening at ASTRA_API: exit 3 and a sentence naming the address, no traceback."""
    with refusing_port() as port:
        api = f"http://127.0.0.1:{port}"
        env = {"ASTRA_API": api, "ASTRA_TOKEN": "t", "ASTRA_CONFIG": str(tmp_path / "none.toml")}
        done = _astra("astraeus", "list", env=env)
    assert done.returncode == 3
    assert done.stderr.startswith(f"astra: cannot reach the coordinator at {api}: ")
    assert "Traceback" not in done.stderr


def test_wrong_token_is_a_sentence_and_exit_4(coordinator: Coordinator, tmp_path: Path) -> None:
    """A token the coordinator does not know: exit 4, a sentence pointing at ASTRA_TOKEN."""
    env = {
        "ASTRA_API": coordinator.url,
        "ASTRA_TOKEN": "astr_wrong",
        "ASTRA_CONFIG": str(tmp_path / "none.toml"),
    }
    done = _astra("astraeus", "machines", env=env)
    assert done.returncode == 4
    assert done.stderr == (
        f"astra: the coordinator at {coordinator.url} does not know this token (missing or "
        "unknown bearer token: send Authorization: Bearer <token>). Check ASTRA_TOKEN or --token.\n"
    )


def test_missing_token_says_where_to_set_one(astra: Astra, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no token anywhere, the CLI says how to give one and exits 4 without calling out."""
    from astraeus.coordinator.cli import main

    monkeypatch.delenv("ASTRA_TOKEN", raising=False)
    assert main(["astraeus", "list"]) == 4


def test_member_doing_admin_work_gets_exit_4(coordinator: Coordinator, astra: Astra) -> None:
    """A member token cordoning a machine is refused with the coordinator's sentence."""
    token = coordinator.member("vision")
    result = astra("astraeus", "token", "list", token=token)
    assert (result.code, result.err) == (4, "astra: this needs an admin token\n")


def test_unknown_run_is_exit_5(coordinator: Coordinator, astra: Astra) -> None:
    """Asking for a run that does not exist: exit 5 and the coordinator's words."""
    token = coordinator.member("vision")
    result = astra("astraeus", "status", "nope", token=token)
    assert (result.code, result.err) == (5, "astra: no run named 'nope'\n")


def test_taken_name_is_exit_1_with_the_field(coordinator: Coordinator, astra: Astra) -> None:
    """Submitting a name already used is refused (exit 1), naming the field and what to do."""
    token = coordinator.member("vision")
    assert astra("astraeus", "run", "--name", "a", "--", "true", token=token).code == 0
    result = astra("astraeus", "run", "--name", "a", "--", "true", token=token)
    assert result.code == 1
    assert result.err == (
        "astra: a run named 'a' is Pending in workspace vision\n"
        "  name: is already used in this workspace; by a run that is Pending: cancel that run"
        " first (the name of a run that has ended may be used again), or pick another name\n"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--name", "Bad_Name", "--", "true"],
            "astra: the run is not valid:\n"
            "name: 'Bad_Name' is not allowed: use lowercase letters, digits and '-', up to 63"
            " characters, starting and ending with a letter or digit",
        ),
        (["--name", "a", "--mem", "lots", "--", "true"], "astra: --mem: 'lots' is not a size"),
        (["--name", "a"], "astra: command: put the command after --, e.g. -- python train.py"),
        (["--", "true"], "astra: name: give the run a name with --name"),
        (
            ["--name", "a", "--gpus", "12", "--machines", "5", "--", "true"],
            "astra: the run is not valid:\nrequested_resources: Cannot plan workers: "
            "cannot evenly distribute 12 gpus across 5 machines",
        ),
    ],
    ids=["bad-name", "bad-size", "no-command", "no-name", "uneven-split"],
)
def test_bad_run_flags_name_the_field_and_exit_2(
    astra: Astra, argv: list[str], message: str
) -> None:
    """Bad input is refused before anything is sent: exit 2 and the field's name."""
    result = astra("astraeus", "run", *argv, token="unused")  # noqa: S106 - never sent
    assert result.code == 2
    assert result.err.startswith(message)


def test_config_file_gives_api_and_token(tmp_path: Path) -> None:
    """The TOML file is read last: flags, then ASTRA_* variables, then the file."""
    path = tmp_path / "config.toml"
    path.write_text('api = "https://file:1"\ntoken = "from-file"\nworkspace = "vision"\n')
    env = {"ASTRA_CONFIG": str(path), "ASTRA_TOKEN": "from-env"}
    target = resolve(api=None, token=None, workspace=None, environ=env)
    assert (target.api, target.token, target.workspace) == ("https://file:1", "from-env", "vision")
    flagged = resolve(api="https://flag:2/", token="t", workspace=None, environ=env)  # noqa: S106
    assert (flagged.api, flagged.token) == ("https://flag:2", "t")


def test_config_file_with_an_unknown_key_is_refused(tmp_path: Path) -> None:
    """A misspelt key in the config file is named, not ignored."""
    path = tmp_path / "config.toml"
    path.write_text('tokn = "x"\n')
    with pytest.raises(CliError, match=r"unknown key 'tokn'; use api, token, workspace"):
        resolve(api=None, token=None, workspace=None, environ={"ASTRA_CONFIG": str(path)})


class _HtmlHandler(http.server.BaseHTTPRequestHandler):
    """Answers every request with a 200 HTML page, as a proxy's login page would."""

    def do_GET(self) -> None:
        body = b"<html>sign in</html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


def test_a_server_that_is_not_the_api_is_named(
    astra: Astra, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ASTRA_API pointing at some other web server: exit 3 and a sentence, not a JSON error."""
    server = http.server.HTTPServer(("127.0.0.1", 0), _HtmlHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        api = f"http://127.0.0.1:{server.server_port}"
        monkeypatch.setenv("ASTRA_API", api)
        result = astra("astraeus", "list")
        assert (result.code, result.err) == (
            3,
            f"astra: {api} answered, but not as an Astraeus coordinator; "
            "check ASTRA_API or --api\n",
        )
    finally:
        server.shutdown()
        server.server_close()


def test_token_file_keeps_the_token_out_of_ps(
    coordinator: Coordinator, astra: Astra, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--token-file PATH` reads the token from a file (a `--token` shows in `ps`); it wins over
    ASTRA_TOKEN, and an unreadable or empty file is exit 2 naming it."""
    path = tmp_path / "admin.token"
    path.write_text(coordinator.admin + "\n")
    wrong = "astr_wrong"
    listed = astra("astraeus", "token", "list", "--token-file", str(path), token=wrong)
    assert (listed.code, listed.out.splitlines()[0].split()[:2]) == (0, ["ID", "ROLE"])
    monkeypatch.setenv("ASTRA_TOKEN", "astr_wrong")
    assert resolve(api=None, token=None, workspace=None, token_file=str(path)).token == (
        coordinator.admin
    )
    empty = tmp_path / "empty.token"
    empty.write_text("\n")
    with pytest.raises(CliError, match=r"^the token file .*empty.token is empty$"):
        resolve(api=None, token=None, workspace=None, token_file=str(empty))
    with pytest.raises(CliError, match=r"^cannot read the token file .*none: No such file"):
        resolve(api=None, token=None, workspace=None, token_file=str(tmp_path / "none"))


@pytest.mark.parametrize(
    "api", ["http://coord:8470", "http://10.0.0.5:8470", "http://[2001:db8::1]:8470"]
)
def test_plain_http_to_another_machine_is_refused(api: str) -> None:
    """The token would cross the network unencrypted: refused (exit 2) saying why and what to
    do, unless the user says the network is trusted; loopback and https need nothing."""
    with pytest.raises(CliError) as refused:
        resolve(api=api, token=None, workspace=None, environ={})
    assert refused.value.code == Exit.USAGE
    assert refused.value.message == (
        f"api: {api} is plain http to another machine, so the token would cross the network"
        " unencrypted; use https:// (docs/operator.md), or --allow-plain-http"
        " (ASTRA_ALLOW_PLAIN_HTTP=1) on a network you trust"
    )
    assert (
        resolve(api=api, token=None, workspace=None, environ={}, allow_plain_http=True).api == api
    )
    allowed = {"ASTRA_ALLOW_PLAIN_HTTP": "1"}
    assert resolve(api=api, token=None, workspace=None, environ=allowed).api == api
    for fine in ("http://127.0.0.1:8470", "http://localhost:8470", "https://coord:8443"):
        assert resolve(api=fine, token=None, workspace=None, environ={}).api == fine
