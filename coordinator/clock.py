"""Where the coordinator reads the time: a protocol, so tests pass a clock they move by hand."""

from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """Tells the current time, always timezone-aware UTC."""

    def now(self) -> datetime: ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)
