"""Shared fixtures for the agent's tests: a fake clock and fake machines on disk."""

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from astraeus.agent.fake import FakeMachine, load_fake_machine
from astraeus.shared.clock import FakeClock

START = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def machine_factory(tmp_path: Path, clock: FakeClock):  # type: ignore[no-untyped-def]
    """Load a shipped fake machine by name and write its tree under tmp_path."""

    def make(name: str) -> FakeMachine:
        machine = load_fake_machine(name, clock=clock)
        machine.write_tree(tmp_path / "root" / name)
        return machine

    return make


CAPTURE = Path("shared/realdata/procfs-capture")
"""A real machine's /proc and /sys (Prometheus procfs fixtures), beside the repository in
`../shared`: CI clones the repository with shared/ beside it; a worktree finds it a level up."""
NO_CAPTURE = (
    "the real-machine capture is not here: expected ../shared/realdata/procfs-capture beside "
    "the repository (or a folder named by ASTRAEUS_REALDATA)"
)


def find_capture(environ: dict[str, str] | None = None) -> Path | None:
    """The capture, read in place: ASTRAEUS_REALDATA, else `shared/` beside the repository or
    beside a folder above it."""
    env = (os.environ if environ is None else environ).get("ASTRAEUS_REALDATA")
    if env:
        return Path(env) if Path(env).is_dir() else None
    repo = Path(__file__).resolve().parents[2]
    return next((p / CAPTURE for p in repo.parents if (p / CAPTURE).is_dir()), None)


def require_capture(environ: dict[str, str] | None = None) -> Path:
    found = find_capture(environ)
    if found is None:
        pytest.skip(NO_CAPTURE)
    return found


@pytest.fixture
def capture() -> Path:
    return require_capture()
