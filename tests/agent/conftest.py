"""Shared fixtures for the agent's tests: a fake clock and fake machines on disk."""

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from astraeus.agent.fake import FakeMachine, load_fake_machine

START = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


class FakeClock:
    """A clock that only moves when told to."""

    def __init__(self, now: datetime = START) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def machine_factory(tmp_path: Path, clock: FakeClock):  # type: ignore[no-untyped-def]
    """Load a shipped fake machine by name and write its tree under tmp_path."""

    def make(name: str) -> FakeMachine:
        machine = load_fake_machine(name, clock=clock)
        machine.write_tree(tmp_path / "root" / name)
        return machine

    return make
