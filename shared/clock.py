"""Where both programs read the time: one protocol, the real clock, and a fake tests move.

`now()` is wall-clock time, timezone-aware UTC: what is stored, reported and compared between
machines. Code that measures a span on one machine (a timeout, a pass's time budget) reads
`time.monotonic()` or `time.perf_counter()` by name instead, and says why."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """Tells the current time, always timezone-aware UTC."""

    def now(self) -> datetime: ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)


SYSTEM_CLOCK = SystemClock()
"""The real clock, as a default argument."""


class FakeClock:
    """Tells the time it was set to; it moves only with `advance`."""

    def __init__(self, start: datetime) -> None:
        self._now = start

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)
