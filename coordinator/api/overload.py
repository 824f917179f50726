"""Load shedding: how far behind the event loop runs, and the answer to a report refused for it.

Every request is read, checked and answered on one event loop. Past what the machine's cores
can take, requests no longer wait in any queue of ours but in the kernel's sockets and the
loop's ready list, unseen, until agents give up after 30 s. So the loop measures itself: a tick
is due every `TICK_SECONDS`, and while it is overdue the loop has been busy that long without
getting back to what waits for it (`LoopDelay`). A report that arrives while the loop, or the
writer thread its write would queue on (`Writer.delay`), runs further behind than
`max_report_delay_seconds` is refused at once: 503 with `Retry-After` (for the loop, before its
body is read). Its machine still counts as heard (`MachineRecords.heard`): an overloaded
coordinator never shows a reporting machine Down. Refusing costs about half of taking a report
(the HTTP request, the token check), so it is the agents' waiting `Retry-After` (twice the
report interval) that brings the load down.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time

from astraeus.coordinator.metrics import Metrics
from astraeus.coordinator.reports import OverloadError
from astraeus.coordinator.settings import Settings
from astraeus.coordinator.store import StorageError

from .errors import ApiError

log = logging.getLogger(__name__)

WARN_EVERY_SECONDS = 60.0
"""While reports are shed, one warning a minute at most, with how many."""

TICK_SECONDS = 0.05
"""How often the loop's delay is measured; a delay shorter than this is not seen."""


class LoopDelay:
    """Seconds the event loop is behind now: how long its tick has been overdue (0 on time)."""

    def __init__(self) -> None:
        self._due: float | None = None
        """When the tick is due (`time.monotonic`); None before the first."""

    def seconds(self) -> float:
        due = self._due
        return 0.0 if due is None else max(0.0, time.monotonic() - due)

    async def run(self) -> None:
        """Tick until cancelled (a background task of the app)."""
        while True:
            self._due = time.monotonic() + TICK_SECONDS
            await asyncio.sleep(TICK_SECONDS)


class Overload:
    """Shedding for the report route: whether the loop runs too far behind for a report now,
    and the refusal, counted (`astraeus_reports_shed_total`) and logged at most once a minute."""

    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        self.loop = LoopDelay()
        self.limit = settings.max_report_delay_seconds
        self.retry_after = refused_retry_after(settings)
        """`Retry-After` for every report refused (shed, or refused by a storage fault)."""
        self._metrics = metrics
        self._warned: float | None = None
        self._since_warned = 0

    def loop_behind(self) -> OverloadError | None:
        """The refusal for a report arriving now, when the loop is too far behind; else None."""
        behind = self.loop.seconds()
        if self.limit and behind > self.limit:
            return OverloadError("its event loop", behind)
        return None

    def refuse(self, error: OverloadError, queue: str) -> ApiError:
        """The 503 answering a report shed because `queue` ran behind (`SHED_LOOP`,
        `SHED_WRITER`)."""
        self._metrics.reports_shed[queue] += 1
        self._since_warned += 1
        now = time.monotonic()
        if self._warned is None or now - self._warned >= WARN_EVERY_SECONDS:
            log.warning(
                "%d agent reports shed (503, Retry-After) since the last warning: %s"
                " (max_report_delay_seconds = %g)",
                self._since_warned,
                error,
                self.limit,
            )
            self._warned, self._since_warned = now, 0
        return ApiError(503, str(error), headers={"Retry-After": self.retry_after})

    def storage_fault(self, error: StorageError) -> ApiError:
        """The 503 answering a report a storage fault refused (its machine counted as heard):
        the same `Retry-After` as a shed report's, which keeps the agent heard from."""
        return ApiError(503, str(error), headers={"Retry-After": self.retry_after})


def refused_retry_after(settings: Settings) -> str:
    """`Retry-After` for a refused report, in whole seconds (at least 1): twice the report
    interval, so agents refused together come back at half the rate or less, but at most a
    third of `down_after_seconds`, so an agent that waits it (plus its jitter, up to half
    again) is heard from again well before its machine would be Down."""
    seconds = min(2 * settings.report_interval_seconds, settings.down_after_seconds / 3)
    return str(max(1, math.floor(seconds)))


def retry_after(report_interval_seconds: float) -> str:
    """`Retry-After` for a report refused because another of its machine's is in flight: the
    agents' report interval, in whole seconds."""
    return str(max(1, math.ceil(report_interval_seconds)))
