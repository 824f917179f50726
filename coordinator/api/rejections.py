"""Agents refused at the door, in the coordinator's log. An agent with a wrong token retries
for as long as it runs, and a log line per try would bury the rest: at most one line a minute
for each kind of refusal and source address, saying how many came since the last line.

TLS handshakes that fail (an agent that does not trust the certificate, plain http to the TLS
port) never reach aiohttp: asyncio drops them before any request exists, so only the agents'
own logs tell of them (docs/runtime.md)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from astraeus.shared.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger("astraeus.coordinator.rejections")

EVERY_SECONDS = 60.0
MAX_SOURCES = 4096
"""Sources remembered at once; past this (many addresses in one minute), the rest count under
one line, "other addresses", so memory stays bounded whoever knocks."""
OTHERS = "other addresses"


@dataclass
class _Seen:
    logged_at: datetime
    since: int = 0
    """Refusals not logged since the last line."""


class Rejections:
    """One line per kind and source a minute (`note`)."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = clock
        self.seen: dict[tuple[str, str], _Seen] = {}

    def note(self, kind: str, source: str | None, detail: str) -> None:
        """An agent's report refused for `kind` (e.g. "unknown token") from `source`; `detail`
        says which machine it claimed."""
        now = self.clock.now()
        key = (kind, source or "an unknown address")
        if key not in self.seen and len(self.seen) >= MAX_SOURCES:
            self._forget(now)
            if len(self.seen) >= MAX_SOURCES:
                key = (kind, OTHERS)
        seen = self.seen.get(key)
        if seen is not None and not _over(seen, now):
            seen.since += 1
            return
        more = f"; {seen.since} more since the last such line" if seen and seen.since else ""
        log.warning(
            "refused an agent's report from %s: %s (%s)%s", key[1], kind, detail[:200], more
        )
        self.seen[key] = _Seen(now)

    def _forget(self, now: datetime) -> None:
        """Drop the sources whose minute is over (their count since is lost)."""
        self.seen = {key: seen for key, seen in self.seen.items() if not _over(seen, now)}


def _over(seen: _Seen, now: datetime) -> bool:
    """Its minute is over: the next refusal is logged."""
    return (now - seen.logged_at).total_seconds() >= EVERY_SECONDS
