"""Fixtures: a real coordinator on loopback and a way to run `astra` in-process against it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from astraeus.coordinator.cli import main

from .rig import Coordinator


@dataclass
class Result:
    code: int
    out: str
    err: str


Astra = Callable[..., Result]


@pytest.fixture
def coordinator(tmp_path: Path) -> Iterator[Coordinator]:
    """A coordinator with its SQLite file in tmp_path, on an ephemeral 127.0.0.1 port."""
    server = Coordinator(tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def astra(
    coordinator: Coordinator,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Astra:
    """`astra(*argv, token=...)` runs the CLI with ASTRA_API pointing at the coordinator."""
    monkeypatch.setenv("ASTRA_API", coordinator.url)
    monkeypatch.setenv("ASTRA_CONFIG", str(tmp_path / "no-config.toml"))
    monkeypatch.delenv("ASTRA_WORKSPACE", raising=False)

    def run(*argv: str, token: str | None = None) -> Result:
        monkeypatch.setenv("ASTRA_TOKEN", token or coordinator.admin)
        capsys.readouterr()
        code = main(list(argv))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run
