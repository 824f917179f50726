"""A standby coordinator (PostgreSQL): it tries to take the leader's lease every second, and
meanwhile answers on its listen address with where the leader is.

It never opens the store (no migrations, no reads of the queue): its only state is the lease
row (`store/leader.py`). Its answers are the protocol clients follow to the leader (agents and
`astra` given several coordinator URLs), so they stay exactly as documented in
docs/coordinator.md ("Leader and standbys"):

- `GET /healthz`: 503 `{"status": "standby", "leader": URL or null, ...}`;
- `GET /metrics`: `astraeus_coordinator_leader 0` (no token needed: it tells nothing else);
- `/api/...`, any method: 503, `Retry-After: 1`, `Astraeus-Leader: URL`, and the JSON error
  `{"error": "this coordinator is a standby; the leader is URL", "fields": [], "leader": URL}`;
- any other GET (the console's pages): 307 to the same path on the leader.

Once it wins the lease it stops listening and returns: `serve` then starts exactly as a
restart does, on the same address.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
import sys
from dataclasses import dataclass

from aiohttp import web

from astraeus.coordinator.api.errors import MAX_REQUEST_LINE
from astraeus.coordinator.settings import Settings
from astraeus.coordinator.store.leader import TAKE_EVERY_SECONDS, Leader, Leadership
from astraeus.coordinator.tls import ServerCertificate
from astraeus.shared.sdnotify import Notifier

log = logging.getLogger("astraeus.coordinator")

LEADER_HEADER = "Astraeus-Leader"
"""The header naming the leader's URL on a standby's 503."""

RETRY_AFTER = 1
"""Seconds a client is told to wait before trying again (a takeover takes about that)."""

LISTENING = "astraeus-coordinator: listening on "


@dataclass
class View:
    """What the standby knows of the leader (the lease row, read every second)."""

    leader: Leader | None = None
    reachable: bool = True
    """Whether the last read of the row succeeded."""

    @property
    def url(self) -> str | None:
        return self.leader.url if self.leader is not None else None

    def body(self) -> dict[str, object]:
        leader = self.leader
        return {
            "status": "standby",
            "leader": self.url,
            "holder": leader.holder if leader is not None else None,
            "epoch": leader.epoch if leader is not None else None,
            "database": "reachable" if self.reachable else "unreachable",
        }


VIEW: web.AppKey[View] = web.AppKey("view", View)


def standby_app(view: View) -> web.Application:
    """The standby's answers (see the module's text)."""
    app = web.Application()
    app[VIEW] = view
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/metrics", _metrics)
    app.router.add_route("*", "/{tail:.*}", _elsewhere)
    return app


async def _healthz(request: web.Request) -> web.Response:
    view = request.app[VIEW]
    return web.json_response(view.body(), status=503, headers={"Retry-After": str(RETRY_AFTER)})


async def _metrics(request: web.Request) -> web.Response:
    name = "astraeus_coordinator_leader"
    text = (
        f"# HELP {name} 1 while this coordinator leads (places and answers the API),"
        " 0 while it stands by.\n"
        f"# TYPE {name} gauge\n{name} 0\n"
    )
    return web.Response(text=text, content_type="text/plain", charset="utf-8")


async def _elsewhere(request: web.Request) -> web.StreamResponse:
    """The API: 503 naming the leader. A console page: a redirect to it, where it is known."""
    url = request.app[VIEW].url
    if url is not None and request.method in ("GET", "HEAD") and not _is_api(request.path):
        raise web.HTTPTemporaryRedirect(url + request.rel_url.path_qs)
    error = (
        f"this coordinator is a standby; the leader is {url}"
        if url is not None
        else "this coordinator is a standby; there is no leader yet"
    )
    headers = {"Retry-After": str(RETRY_AFTER)}
    if url is not None:
        headers[LEADER_HEADER] = url
    return web.json_response(
        {"error": error, "fields": [], "leader": url}, status=503, headers=headers
    )


def _is_api(path: str) -> bool:
    return path == "/api" or path.startswith("/api/")


async def stand_by(
    settings: Settings,
    leadership: Leadership,
    notifier: Notifier,
    certificate: ServerCertificate | None,
) -> Settings | int:
    """Try to lead; while another does, serve the standby's answers on the listen address.
    Returns the settings to lead with (`listen` with the port actually bound) once this
    process holds the lease, or the exit status when stopped (SIGTERM, SIGINT) first."""
    view = View()
    if await _try(leadership, view):
        return settings
    app = standby_app(view)
    runner = web.AppRunner(app, access_log=None, max_line_size=MAX_REQUEST_LINE)
    await runner.setup()
    context = certificate.context if certificate is not None else None
    site = web.TCPSite(runner, settings.host, settings.port, ssl_context=context)
    await site.start()
    port = runner.addresses[0][1] if runner.addresses else settings.port
    address = f"{settings.scheme}://{settings.host}:{port}"
    if leadership.advertise is None:
        leadership.advertise = address
    log.info("standby on %s, database %s", address, leadership.shown)
    print(f"{LISTENING}{address}", file=sys.stderr, flush=True)  # as a leader says it
    notifier.notify("READY=1\nSTATUS=standby")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if certificate is not None:  # as the leader does: SIGHUP reloads, never ends the process
        loop.add_signal_handler(signal.SIGHUP, certificate.reload, "SIGHUP")
    pinging = (
        asyncio.create_task(_ping(notifier, notifier.watchdog_seconds / 2))
        if notifier.watchdog_seconds
        else None
    )
    try:
        won = await _wait_for_the_lease(leadership, view, stop)
    finally:
        if pinging is not None:
            pinging.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pinging
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.remove_signal_handler(sig)
        await runner.cleanup()
    if not won:
        leadership.resign()
        leadership.close()
        return 0
    log.info("leading at epoch %s: starting on %s", leadership.epoch, address)
    return dataclasses.replace(settings, listen=f"{settings.host}:{port}")


async def _wait_for_the_lease(leadership: Leadership, view: View, stop: asyncio.Event) -> bool:
    """Try every `TAKE_EVERY_SECONDS` until this process leads (True) or is stopped."""
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), TAKE_EVERY_SECONDS)
        if stop.is_set():
            break
        if await _try(leadership, view):
            return not stop.is_set()  # stopped meanwhile: the caller resigns at once
    return False


async def _try(leadership: Leadership, view: View) -> bool:
    """One try at the lease; the view updated (and a line logged when the leader changes)."""
    try:
        taken = await asyncio.to_thread(leadership.take)
    except Exception as error:  # the database out of reach: try again
        if view.reachable:
            log.warning("standby: cannot read the leader's lease: %s", error)
        view.reachable = False
        return False
    view.reachable = True
    if isinstance(taken, int):
        return True
    before = view.leader
    view.leader = taken
    if taken is not None and (before is None or before.epoch != taken.epoch):
        await _log_leader(leadership, taken)
    return False


async def _log_leader(leadership: Leadership, leader: Leader) -> None:
    """`standby: <holder> leads (epoch N)`, with the lease session the database shows."""
    with contextlib.suppress(Exception):
        session = await asyncio.to_thread(leadership.lease_session)
        if session is not None:
            log.info(
                "standby: %s leads (epoch %d) at %s; its lease session: %s",
                leader.holder,
                leader.epoch,
                leader.url,
                session,
            )
            return
    log.info("standby: %s leads (epoch %d) at %s", leader.holder, leader.epoch, leader.url)


async def _ping(notifier: Notifier, interval: float) -> None:
    while True:
        notifier.watchdog()
        await asyncio.sleep(interval)
