"""`astra` loads only what a command uses: never the server, nothing heavy for `--help`, and on
the paths users type all day (`status`, `list`, `run`, `logs`, `machines`) neither pydantic,
aiohttp nor `urllib.request`: each answers from the API's JSON as it comes (issue 29)."""

from __future__ import annotations

import http.server
import importlib
import itertools
import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import pytest

from astraeus.coordinator.cli import main

from .rig import H100, Coordinator, gpu_report

main_module = importlib.import_module("astraeus.coordinator.cli.main")
"""The module `main` (the package's `main` is its function), whose `quick_args` a test stops."""

SERVER = ("aiohttp.web", "sqlite_utils", "astraeus.coordinator.store", "astraeus.coordinator.api")
ENGINE = ("astraeus.coordinator.scheduler", "astraeus.coordinator.placement")
HEAVY = (
    "pydantic",
    "pydantic_core",
    "aiohttp",
    "urllib.request",
    "http.client",
    "email",
    "dataclasses",
    "astraeus.shared.ask",
    "astraeus.shared.run",
    "astraeus.shared.machines",
    "astraeus.shared.views",
    "astraeus.shared.validation",
    "ssl",
)
"""What the everyday paths must not load: the models and pydantic (~100 ms), aiohttp, the
heavier HTTP clients, `dataclasses` (which loads `inspect`), and, asking a plain-http
coordinator, `ssl` (OpenSSL's libraries and a dozen enums)."""


_SUBMITTED = itertools.count(1)


def _loaded(
    argv: list[str], env: dict[str, str] | None = None, *, isolated: bool = False
) -> tuple[int, set[str]]:
    """`astra ARGV`'s exit code and every module it loaded, run in a fresh interpreter;
    `isolated`, as the `astra` launcher runs it (the harness itself loads nothing before).
    The run `submitted` gets a new name each time: the module's tests share one coordinator,
    which refuses a second run of one name."""
    argv = [f"submitted-{next(_SUBMITTED)}" if arg == "submitted" else arg for arg in argv]
    code = (
        "import io, json, sys\n"
        "from contextlib import redirect_stderr as err, redirect_stdout as out\n"
        "from astraeus.coordinator.cli import main\n"
        "with out(io.StringIO()), err(io.StringIO()):\n"
        f"    code = main({argv!r})\n"
        "print(json.dumps([code, sorted(sys.modules)]))\n"
    )
    if isolated:  # what `main` loaded, seen before the harness loads `json` to say it
        code = (
            "import sys\n"
            "from astraeus.coordinator.cli import main\n"
            "out, sys.stdout, sys.stderr = sys.stdout, open('/dev/null', 'w'), sys.stderr\n"
            f"code = main({argv!r})\n"
            "loaded = sorted(sys.modules)\n"
            "sys.stdout = out\n"
            "import json\n"
            "print(json.dumps([code, loaded]))\n"
        )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={
            "ASTRA_TOKEN": "x",
            "ASTRA_CONFIG": "/dev/null",
            "PATH": "/usr/bin:/bin",
            **(env or {}),
        },
    )
    exit_code, modules = json.loads(done.stdout)
    return exit_code, set(modules)


def _under(loaded: set[str], roots: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded for r in roots if m == r or m.startswith(r + "."))


def test_help_loads_no_models_client_or_server() -> None:
    """`astra --help` imports neither pydantic, the HTTP client, the models nor the server."""
    _, loaded = _loaded(["--help"])
    heavy = ("pydantic", "urllib.request", "http.client", "astraeus.shared.ask", *SERVER, *ENGINE)
    assert _under(loaded, heavy) == []


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Coordinator]:
    """One coordinator for the module: its tests only read, but for the runs they submit, whose
    names no other test asks about (and which they remove again)."""
    coordinator = Coordinator(tmp_path_factory.mktemp("light"))
    coordinator.start()
    try:
        yield coordinator
    finally:
        coordinator.stop()


@pytest.fixture(scope="module")
def cluster(shared: Coordinator) -> dict[str, str]:
    """The shared coordinator with one machine running `train`, which printed a line; the
    environment that points `astra` at it as a member of `vision`."""
    return _with_train(shared)


def _with_train(coordinator: Coordinator) -> dict[str, str]:
    machine = gpu_report("gpu-01", 8, H100, 80)
    coordinator.report(machine)
    token = coordinator.member("vision")
    spec = {
        "name": "train",
        "command": ["x"],
        "requested_resources": {"gpu_requests": {"count": 1}},
    }
    coordinator.call("POST", "/api/v1/runs", spec, token)
    coordinator.run_pass()
    coordinator.report(
        machine,
        [{"task": "train-0", "state": "Running"}],
        [{"task": "train-0", "offset": 0, "data": "step 1\n"}],
    )
    return {"ASTRA_API": coordinator.url, "ASTRA_TOKEN": token}


EVERYDAY = {
    "status": ["astraeus", "status", "train"],
    "status-why": ["status", "train", "--why", "-o", "json"],
    "list": ["astraeus", "list"],
    "dry-run": ["astraeus", "run", "--name", "probe", "--gpus", "1", "--dry-run", "--", "x"],
    "run": ["astraeus", "run", "--name", "submitted", "--gpus", "1", "--", "x"],
    "logs": ["astraeus", "logs", "train"],
    "machines": ["astraeus", "machines"],
    "machine": ["astraeus", "machine", "gpu-01"],
    "unknown-run": ["astraeus", "status", "nope"],
}


@pytest.mark.parametrize("argv", EVERYDAY.values(), ids=EVERYDAY.keys())
def test_everyday_paths_load_no_pydantic_aiohttp_or_server(
    cluster: dict[str, str], argv: list[str]
) -> None:
    """Each command answers (exit 0; 5 for a run that does not exist) having loaded none of
    `HEAVY`, the server or the engine."""
    code, loaded = _loaded(argv, cluster)
    assert code == (5 if "nope" in argv else 0)
    assert _under(loaded, (*HEAVY, *SERVER, *ENGINE)) == []


def test_a_refused_spec_loads_the_model_to_name_its_fields(cluster: dict[str, str]) -> None:
    """The one place the models are worth their cost: a spec the coordinator refused is said
    field by field (exit 2), as `astra validate` says it."""
    code, loaded = _loaded(["run", "--name", "Bad_Name", "--dry-run", "--", "x"], cluster)
    assert code == 2
    assert "astraeus.shared.run" in loaded


LEAN = (
    "argparse",
    "typing",
    "urllib.parse",
    "pathlib",
    "tomllib",
    "ipaddress",
    "importlib.metadata",
    "astraeus.shared.choices",
    "astraeus.coordinator.cli.parser",
)
"""What the everyday paths no longer load either (issue 29): the full command line (argparse,
and building its parser), `typing`, `urllib.parse` (`pathlib` loads it), `ipaddress`, and the
config file's parser where no config file has anything in it."""


@pytest.mark.parametrize("argv", EVERYDAY.values(), ids=EVERYDAY.keys())
def test_everyday_paths_load_no_argparse_typing_or_urllib(
    cluster: dict[str, str], argv: list[str]
) -> None:
    code, loaded = _loaded(argv, cluster)
    assert code == (5 if "nope" in argv else 0)
    assert _under(loaded, LEAN) == []


LEANEST = ("re", "enum", "json", "socket", "selectors", "typing", "argparse", "collections")
"""What the text output of the everyday paths needs none of (issue 29): `re` and `enum` (about
a fifth of `astra status` each), `json`'s Python half (`plainjson.py` uses its C half),
`socket`'s Python module (`transport.py` uses `_socket`)."""


@pytest.mark.parametrize(
    "argv",
    [argv for argv in EVERYDAY.values() if "-o" not in argv],
    ids=[key for key, argv in EVERYDAY.items() if "-o" not in argv],
)
def test_everyday_text_paths_load_no_re_enum_json_or_socket(
    cluster: dict[str, str], argv: list[str]
) -> None:
    code, loaded = _loaded(argv, cluster, isolated=True)
    assert code == (5 if "nope" in argv else 0)
    assert _under(loaded, LEANEST) == []


def test_an_unusual_flag_goes_the_full_way(cluster: dict[str, str]) -> None:
    """A command line the quick reader is not sure of is argparse's, which answers it."""
    code, loaded = _loaded(["astraeus", "status", "train", "--wh"], cluster)
    assert code == 0  # `--wh` is argparse's abbreviation of `--why`
    assert "argparse" in loaded


def test_a_config_file_with_settings_is_read(cluster: dict[str, str], tmp_path: Path) -> None:
    """Where the config file says something, its parser is loaded to read it."""
    config = tmp_path / "config.toml"
    config.write_text(f'api = "{cluster["ASTRA_API"]}"\n')
    env = {"ASTRA_TOKEN": cluster["ASTRA_TOKEN"], "ASTRA_CONFIG": str(config)}
    code, loaded = _loaded(["astraeus", "status", "train"], env)
    assert code == 0
    assert "tomllib" in loaded


@pytest.fixture
def both_ways(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[[list[str]], tuple[Said, Said]]:
    """`astra ARGV` run in-process twice: as `astra` runs it (the quick reader first), and
    forced the full way (argparse); what each said."""

    def said(argv: list[str]) -> Said:
        capsys.readouterr()
        code = main(list(argv))
        out, err = capsys.readouterr()
        return Said(code, out, err)

    def run(argv: list[str]) -> tuple[Said, Said]:
        quick = said(argv)
        with monkeypatch.context() as patch:
            patch.setattr(main_module, "quick_args", lambda _argv: None)
            return quick, said(argv)

    return run


class Said(NamedTuple):
    code: int
    out: str
    err: str


def _env(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    for key in ("ASTRA_WORKSPACE", "ASTRA_CA", "HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("ASTRA_CONFIG", "/dev/null")
    for key, value in env.items():
        monkeypatch.setenv(key, value)


SAME_ANSWERS = {
    **{key: argv for key, argv in EVERYDAY.items() if key != "run"},
    "json": ["-o", "json", "status", "train"],
    "list-json": ["list", "-o", "json", "--state", "Running"],
    "logs-json": ["logs", "train-0", "-o", "json"],
    "machines-json": ["machines", "--output", "json"],
    "dry-run-json": ["run", "--name", "p", "--gpus", "1", "--dry-run", "-o", "json", "--", "x"],
    "dry-run-waits": ["run", "--name", "p", "--gpus", "64", "--mem", "1T", "--dry-run", "--", "x"],
    "dry-run-cpus": ["run", "--name", "p", "--cpus", "2", "--label", "a=b", "--dry-run", "--", "x"],
    "bad-name": ["run", "--name", "Bad_Name", "--dry-run", "--", "x"],
    "bad-size": ["run", "--name", "p", "--mem", "lots", "--dry-run", "--", "x"],
    "no-command": ["run", "--name", "p", "--dry-run"],
    "odd-name": ["status", "a b/../c?d#e%"],
    "escape-name": ["status", "\x1b[2J\x07"],
    "unicode-name": ["logs", "名前"],
    "not-utf8": ["status", b"caf\xe9".decode("utf-8", "surrogateescape")],
    "no-attempt": ["logs", "train", "--attempt", "7"],
    "unknown-flag": ["status", "train", "--bogus"],
    "double-dash": ["status", "train", "--", "x"],
    "bad-url": ["--api", "ftp://example", "status", "train"],
    "credentials": ["--api", "http://u:p@127.0.0.1:1", "list"],
    "remote-http": ["--api", "http://192.0.2.1:8470", "list"],
    "port-zero": ["--api", "http://127.0.0.1:0", "list"],
    "bad-token-file": ["--token-file", "/nonexistent/token", "list"],
}


@pytest.mark.parametrize("argv", SAME_ANSWERS.values(), ids=SAME_ANSWERS.keys())
def test_both_ways_say_the_same(
    cluster: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    both_ways: Callable[[list[str]], tuple[Said, Said]],
    argv: list[str],
) -> None:
    """Byte for byte the same output, error and exit code, whichever way the command line was
    read: on answers, refusals, hostile names and bad settings (never a traceback)."""
    _env(monkeypatch, cluster)
    quick, full = both_ways(argv)
    assert quick == full
    assert "Traceback" not in quick.err


def test_a_submission_says_the_same_both_ways(
    shared: Coordinator,
    cluster: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`run` submits once each way: the same run, submitted again after the first is cancelled
    and deleted, is told alike."""
    _env(monkeypatch, cluster)
    argv = ["run", "--name", "again", "--gpus", "1", "--", "x"]
    said = []
    for quick in (True, False):
        with monkeypatch.context() as patch:
            if not quick:
                patch.setattr(main_module, "quick_args", lambda _argv: None)
            capsys.readouterr()
            code = main(argv)
            said.append(Said(code, *capsys.readouterr()))
        token = cluster["ASTRA_TOKEN"]
        shared.call("POST", "/api/v1/runs/again/cancel", None, token)
        shared.call("DELETE", "/api/v1/runs/again", None, token)
    assert said[0].code == 0
    assert "again submitted to" in said[0].out
    assert said[0] == said[1]


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (500, b"Internal Server Error"),
        (502, b"<html>Bad Gateway</html>"),
        (200, b"not json"),
        (200, b"[" * 100_000 + b"]" * 100_000),
        (400, b'{"error": "' + b"[" * 100_000 + b'"}'),
        (400, b"[" * 100_000),
        (200, b"{}"),
        (200, b'{"name": 1, "state": [], "tasks": "x"}'),
        (404, b'{"error": "no run named \'x\'"}'),
        (403, b'{"error": "\\u001b[31mforbidden"}'),
        (503, b'{"leader": "http://elsewhere:1"}'),
    ],
)
def test_a_server_that_answers_badly_is_said_alike(
    monkeypatch: pytest.MonkeyPatch,
    both_ways: Callable[[list[str]], tuple[Said, Said]],
    status: int,
    body: bytes,
) -> None:
    with answering(status, body) as url:
        _env(monkeypatch, {"ASTRA_API": url, "ASTRA_TOKEN": "t"})
        for argv in (["status", "x"], ["list"], ["run", "--name", "x", "--dry-run", "--", "y"]):
            quick, full = both_ways(argv)
            assert quick == full
            assert quick.code != 0
            assert quick.err.startswith("astra: ")
            assert "Traceback" not in quick.err


@contextmanager
def answering(status: int, body: bytes) -> Iterator[str]:
    """A server on loopback that answers every request `status` with `body`; its URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer  # noqa: N815 - the names http.server calls

        def log_message(self, *_args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_astra_launcher_loads_no_re(cluster: dict[str, str]) -> None:
    """The installed `astra` (`launchers/astra`, not pip's entry-point wrapper, which imports
    `re` first) answers `status` having loaded none of `LEANEST`."""
    launcher = Path(sys.executable).parent / "astra"
    done = subprocess.run(
        [sys.executable, "-X", "importtime", str(launcher), "status", "train"],
        capture_output=True,
        text=True,
        check=False,
        env={"ASTRA_CONFIG": "/dev/null", "PATH": "/usr/bin:/bin", **cluster},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("train: ")
    loaded = {
        line.rpartition("|")[2].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "astraeus.coordinator.cli.quick" in loaded
    assert _under(loaded, LEANEST) == []
