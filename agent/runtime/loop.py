"""The agent's loop: scan, report, act on the reply; back off while the coordinator is away."""

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from astraeus.shared import AgentReport, MachineReport, ReportReply
from astraeus.shared.assignment import MAX_UPDATES
from astraeus.shared.sdnotify import Notifier

from ..topology.route import route_source
from .client import CoordinatorClient, CoordinatorError
from .runner import Runner

log = logging.getLogger(__name__)

Scan = Callable[[], MachineReport]


@dataclass
class LoopConfig:
    report_interval_seconds: float | None = None
    """None: as the coordinator's reply says."""
    watch_interval_seconds: float = 1.0
    backoff_base_seconds: float = 1.0
    backoff_max_seconds: float = 5.0
    misconfigured_backoff_max_seconds: float = 300.0
    """The cap while the agent's own settings are refused (its CA, its URL's scheme, its
    token): trying every few seconds cannot mend them, and only fills the log."""


def backoff_delay(failures: int, base: float, cap: float, rng: Callable[[], float]) -> float:
    """Doubling from `base` up to `cap`, then a random half of it taken off ("equal jitter"),
    so agents cut off together do not all come back in the same second."""
    ceiling: float = min(cap, base * 2.0 ** min(failures - 1, 30))
    return ceiling * (0.5 + rng() / 2)


RETRY_AFTER_MAX_SECONDS = 60.0
"""The longest `Retry-After` honoured (a coordinator asks at most a third of its Down window,
10 s by default); a longer one is taken as this."""


def retry_delay(retry_after: float, rng: Callable[[], float]) -> float:
    """What the coordinator asked (`Retry-After`, at most `RETRY_AFTER_MAX_SECONDS`), plus up
    to half of it again at random: agents refused together come back spread out, never sooner
    than asked."""
    wait = min(retry_after, RETRY_AFTER_MAX_SECONDS)
    return wait * (1 + rng() / 2)


class Agent:
    """Reports every few seconds and whenever a task changes; keeps workers through outages."""

    def __init__(
        self,
        client: CoordinatorClient,
        runner: Runner,
        scan: Scan,
        *,
        notifier: Notifier | None = None,
        config: LoopConfig | None = None,
        capabilities: Callable[[], list[str]] | None = None,
        rng: Callable[[], float] = random.random,
        advertise: Callable[[], str | None] | None = None,
    ) -> None:
        self.client, self.runner, self.scan = client, runner, scan
        self.notifier = notifier or Notifier({})
        self.config = config or LoopConfig()
        self.capabilities = capabilities or list
        """What the agent adds to each report's capabilities, asked before each report (a
        container runtime's daemon may start or stop)."""
        self.rng = rng
        self.advertise = advertise or (lambda: route_source(client.url))
        """The address this machine advertises, asked before each report (routes change)."""
        self.failures = 0
        self.reports = 0
        self.sent_seq = -1
        self.interval = self.config.report_interval_seconds or ReportReply().report_interval_seconds

    async def run(self, stop: asyncio.Event) -> None:
        """Until `stop` is set. Workers are left running: they belong to their tasks."""
        active = sum(not r.state.ended for r in self.runner.records.values())
        if active:
            log.info("found %d workers started before this agent; watching them again", active)
        # A report in flight (up to its 30 s timeout) must not delay a stop: it is cancelled, which
        # is safe because nothing is acknowledged or shipped until its reply has arrived.
        tasks = [
            asyncio.create_task(self._loop(stop)),
            asyncio.create_task(self._watchdog(stop)),
            asyncio.create_task(stop.wait()),
        ]
        try:
            await asyncio.wait([tasks[0], tasks[2]], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        error = None if tasks[0].cancelled() else tasks[0].exception()
        if error is not None:
            raise error

    async def _loop(self, stop: asyncio.Event) -> None:
        next_report = time.monotonic()
        while not stop.is_set():
            try:
                self.runner.watch()
            except Exception:  # one unreadable worker must not stop the agent watching the rest
                log.exception("watching workers failed; trying again")
            now = time.monotonic()
            news = self.failures == 0 and self.runner.outbox.next_seq - 1 > self.sent_seq
            if news or now >= next_report:
                next_report = now + await self._report_or_back_off()
            wait = min(self.config.watch_interval_seconds, max(0.0, next_report - now))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), wait)

    async def _report_or_back_off(self) -> float:
        """Seconds until the next report."""
        try:
            await self.report_once()
        except CoordinatorError as error:
            return self._back_off(str(error), error.retry_after, error.misconfigured)
        except Exception as error:  # a failing scan or a bug must not end the agent
            log.exception("report failed")
            return self._back_off(f"{type(error).__name__}: {error}")
        if self.failures:
            log.info("coordinator reachable again after %d failed reports", self.failures)
        self.failures = 0
        return self.interval

    def _back_off(
        self, why: str, retry_after: float | None = None, misconfigured: bool = False
    ) -> float:
        """Seconds until the next try: doubling with jitter (`backoff_delay`) up to
        `backoff_max_seconds`, or `misconfigured_backoff_max_seconds` while the agent's own
        settings are refused; and no sooner than the coordinator's `Retry-After`
        (`retry_delay`) when it sent one."""
        self.failures += 1
        config = self.config
        cap = config.misconfigured_backoff_max_seconds if misconfigured else None
        delay = backoff_delay(
            self.failures,
            config.backoff_base_seconds,
            max(cap or 0.0, config.backoff_max_seconds),
            self.rng,
        )
        if retry_after is not None:
            delay = max(delay, retry_delay(retry_after, self.rng))
        log.warning(
            "report failed (%d in a row): %s; next try in %.1f s", self.failures, why, delay
        )
        return delay

    async def report_once(self) -> ReportReply:
        """Scan, send the report with every unacknowledged update and new log, act on the reply."""
        report = await asyncio.to_thread(self.scan)
        address = await asyncio.to_thread(self.advertise)
        added = await asyncio.to_thread(self.capabilities)
        capabilities = sorted({*report.capabilities, *added})
        now = datetime.now(UTC)
        update = {"capabilities": capabilities, "reported_at": now, "advertise_address": address}
        report = report.model_copy(update=update)
        # The oldest first; more than a report may carry go in the next one, at once.
        updates = self.runner.outbox.pending[:MAX_UPDATES]
        body = AgentReport(
            report=report,
            updates=updates,
            logs=self.runner.log_chunks(),
            tasks=self.runner.live_tasks(),
            busy_ports=self.runner.ports.reports(),
            ports_in_use=self.runner.ports.in_use_here,
        )
        reply = await self.client.report(body)
        last = updates[-1].seq if updates else -1
        whole = len(self.runner.outbox.pending) <= MAX_UPDATES
        self.sent_seq = max(self.sent_seq, self.runner.outbox.next_seq - 1 if whole else last)
        self.runner.outbox.ack(reply.acked_seq)
        self.runner.logs_received()
        self.runner.ports.span = reply.rendezvous_ports
        self.runner.sync(reply.assignments, report)
        self.runner.forget_finished(a.task_uid for a in reply.assignments)
        if self.config.report_interval_seconds is None:
            self.interval = reply.report_interval_seconds
        self.reports += 1
        if self.reports == 1:
            self.notifier.ready()
        return reply

    async def _watchdog(self, stop: asyncio.Event) -> None:
        seconds = self.notifier.watchdog_seconds
        if seconds is None:
            return
        while not stop.is_set():
            self.notifier.watchdog()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), seconds / 2)
