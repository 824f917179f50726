"""`astra` loads only what a command uses: never the server, and nothing heavy for `--help`."""

import json
import subprocess
import sys

SERVER = ("aiohttp.web", "sqlite_utils", "astraeus.coordinator.store", "astraeus.coordinator.api")
ENGINE = ("astraeus.coordinator.scheduler", "astraeus.coordinator.placement")


def _loaded(argv: list[str]) -> set[str]:
    code = (
        "import io, json, sys\n"
        "from contextlib import redirect_stderr as err, redirect_stdout as out\n"
        "from astraeus.coordinator.cli import main\n"
        "with out(io.StringIO()), err(io.StringIO()):\n"
        f"    main({argv!r})\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"ASTRA_TOKEN": "x", "ASTRA_CONFIG": "/dev/null", "PATH": "/usr/bin:/bin"},
    )
    return set(json.loads(done.stdout))


def _under(loaded: set[str], roots: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded for r in roots if m == r or m.startswith(r + "."))


def test_help_loads_no_models_client_or_server() -> None:
    """`astra --help` imports neither pydantic, the HTTP client, the models nor the server."""
    loaded = _loaded(["--help"])
    heavy = ("pydantic", "urllib.request", "astraeus.shared.ask", *SERVER, *ENGINE)
    assert _under(loaded, heavy) == []


def test_status_loads_no_server() -> None:
    """`astra astraeus status` reads runs through the shared models, without the server."""
    loaded = _loaded(["astraeus", "status", "x", "--api", "http://127.0.0.1:9"])
    assert "astraeus.shared.run" in loaded
    assert _under(loaded, (*SERVER, *ENGINE)) == []
