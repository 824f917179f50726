"""The two pieces of history health needs: counters over a window, and at-risk signals that
stay until they have been quiet long enough. Shared by GPUs and RDMA ports."""

from collections import deque
from dataclasses import dataclass, field
from datetime import datetime

from astraeus.shared import HealthSignal

from .signals import Window


@dataclass
class CounterHistory:
    """Cumulative counters over time, trimmed to one window."""

    samples: deque[tuple[datetime, dict[str, float]]] = field(default_factory=deque)

    def restarted(self, counters: dict[str, float]) -> bool:
        """A counter below its last value: the device was reset or its driver reloaded."""
        if not self.samples:
            return False
        before = self.samples[-1][1]
        return any(counters.get(k, v) < v for k, v in before.items())

    def add(self, now: datetime, counters: dict[str, float], window_seconds: float) -> Window:
        """Add a sample; the window runs from the newest sample at or before its start."""
        if self.restarted(counters):
            self.samples.clear()
        self.samples.append((now, dict(counters)))
        start = now.timestamp() - window_seconds
        while len(self.samples) > 1 and self.samples[1][0].timestamp() <= start:
            self.samples.popleft()
        first_at, first = self.samples[0]
        return Window(first=first, last=counters, seconds=(now - first_at).total_seconds())


@dataclass
class _Active:
    message: str
    since: datetime
    last_seen: datetime


@dataclass
class SignalBook:
    """At-risk signals by kind: `since` is the first sighting of a streak; a signal unseen for
    the quiet window is dropped."""

    active: dict[str, _Active] = field(default_factory=dict)

    def seen(self, kind: str, message: str, at: datetime) -> None:
        entry = self.active.get(kind)
        if entry is None:
            self.active[kind] = _Active(message, since=at, last_seen=at)
        else:
            entry.message, entry.last_seen = message, max(entry.last_seen, at)

    def expire(self, now: datetime, quiet_seconds: float) -> None:
        for kind, entry in list(self.active.items()):
            if (now - entry.last_seen).total_seconds() >= quiet_seconds:
                del self.active[kind]

    def signals(self) -> list[HealthSignal]:
        """Sorted by kind; `xid_92` and the like are reported as kind `xid`."""
        return [
            HealthSignal(kind=kind.split("_")[0] if kind.startswith("xid_") else kind,
                         message=entry.message, since=entry.since)
            for kind, entry in sorted(self.active.items())
        ]  # fmt: skip
