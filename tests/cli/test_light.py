"""`astra` loads only what a command uses: never the server, nothing heavy for `--help`, and on
the paths users type all day (`status`, `list`, `run`, `logs`, `machines`) neither pydantic,
aiohttp nor `urllib.request`: each answers from the API's JSON as it comes (issue 29)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from .rig import H100, Coordinator, gpu_report

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


def _loaded(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, set[str]]:
    """`astra ARGV`'s exit code and every module it loaded, run in a fresh interpreter."""
    code = (
        "import io, json, sys\n"
        "from contextlib import redirect_stderr as err, redirect_stdout as out\n"
        "from astraeus.coordinator.cli import main\n"
        "with out(io.StringIO()), err(io.StringIO()):\n"
        f"    code = main({argv!r})\n"
        "print(json.dumps([code, sorted(sys.modules)]))\n"
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
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A coordinator with one machine running `train`, which printed a line; the environment
    that points `astra` at it as a member of `vision`. One for the module: its tests only read,
    but for `run` and the refused spec, whose names no other test asks about."""
    coordinator = Coordinator(tmp_path_factory.mktemp("light"))
    coordinator.start()
    try:
        yield _with_train(coordinator)
    finally:
        coordinator.stop()


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
