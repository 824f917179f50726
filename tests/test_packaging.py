"""The package installs as `astraeus.*`, its scripts answer, and CI runs the README's command."""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```sh\n(.*?)```", text, re.S)
    assert block is not None
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_import_astraeus_shared_works_and_bare_shared_does_not(tmp_path: Path) -> None:
    """After the install `astraeus.shared` imports and no bare `shared` or `agent` module does."""
    code = (
        "import importlib.util, astraeus.shared, astraeus.agent, astraeus.coordinator\n"
        "print([importlib.util.find_spec(n) is None for n in ('shared', 'agent', 'coordinator')])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[True, True, True]"


@pytest.mark.parametrize("script", ["astra", "astraeus-coordinator", "astraeus-agent"])
def test_console_scripts_print_usage(script: str) -> None:
    """Each console script answers --help with a usage message and exit code 0."""
    out = subprocess.run([BIN / script, "--help"], capture_output=True, text=True, check=False)
    assert out.returncode == 0
    assert out.stdout.startswith("usage: ")


@pytest.mark.parametrize("script", ["astra", "astraeus-coordinator", "astraeus-agent"])
def test_console_scripts_reject_unknown_commands(script: str) -> None:
    """An unknown command is a usage error (exit 2), not a traceback."""
    out = subprocess.run([BIN / script, "frobnicate"], capture_output=True, text=True, check=False)
    assert out.returncode == 2
    assert "unknown command" in out.stderr
    assert "Traceback" not in out.stderr


def test_readme_starts_with_exactly_two_setup_commands() -> None:
    """The README's first code block holds the two set-up commands and nothing else."""
    commands = _readme_commands()
    assert len(commands) == 2
    assert all(c.startswith("python3 -m venv .venv && ") for c in commands)
    for tool in ("ruff check", "mypy", "pytest"):
        assert tool in commands[1]


def test_ci_runs_the_readme_test_command() -> None:
    """`.ci/run` runs the README's test command verbatim."""
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert _readme_commands()[1] in ci


def test_mypy_path_follows_the_version() -> None:
    """mypy reads the strict editable tree whose folder name carries the package version."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    version = config["project"]["version"]
    assert config["tool"]["mypy"]["mypy_path"].endswith(
        f"build/__editable__.astraeus-{version}-py3-none-any"
    )


def test_astra_validate_names_the_bad_field(tmp_path: Path) -> None:
    """`astra validate` reports a misspelt field with the right name, exit 2 (as `run -f`), no
    traceback."""
    spec = tmp_path / "run.json"
    spec.write_text(
        '{"name": "ft", "command": ["python"], '
        '"requested_resources": {"gpu_requests": {"count": 8, "min_memroy_gb": 80}}}'
    )
    out = subprocess.run(
        [BIN / "astra", "validate", str(spec)], capture_output=True, text=True, check=False
    )
    assert out.returncode == 2
    assert (
        "requested_resources.gpu_requests.min_memroy_gb: unknown field; did you mean "
        "min_memory_gb?" in out.stderr
    )
