"""`PUT /machines/{name}/report`: an agent's heartbeat, task updates and logs; the reply lists the
tasks its machine should run."""

from __future__ import annotations

import ipaddress
import logging
import math
from datetime import datetime

from aiohttp import web

from astraeus.coordinator.store import Role
from astraeus.coordinator.store.port_rows import refuse_ports
from astraeus.shared import AgentReport, ReportReply

from .auth import principal
from .errors import ApiError, fail, read_model
from .keys import CLOCK, REPORTING, SCHEDULER, SETTINGS, STORE
from .routes import Route

log = logging.getLogger(__name__)


async def put_report(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    who = principal(request)
    if who.role != Role.AGENT or who.machine != name:
        fail(403, f"this token may not report for machine {name!r}: use that machine's agent token")
    reporting = request.app[REPORTING]
    if name in reporting:
        # An agent sends one report at a time; more are a loop or an attack on the event loop.
        wait = max(1, math.ceil(request.app[SETTINGS].report_interval_seconds))
        raise ApiError(
            429,
            f"a report for machine {name!r} is already being received: send one at a time",
            headers={"Retry-After": str(wait)},
        )
    reporting.add(name)
    try:
        return await _receive(request, name)
    finally:
        reporting.discard(name)


async def _receive(request: web.Request, name: str) -> web.Response:
    body = await read_model(request, AgentReport)
    if body.report.name != name:
        fail(
            400,
            "report is for another machine",
            "report.name",
            f"is {body.report.name!r} but the URL names {name!r}",
        )
    app = request.app
    store, now = app[STORE], app[CLOCK].now()
    agents, run = store.agents, store.database.run
    # A plain heartbeat is kept in memory here; a report that writes goes to the writer thread.
    address = usable_address(body.report.advertise_address, request.remote)
    beat = agents.beat(body, address, now)
    if beat is None:
        record, changed = await run(agents.store_report, body, address, now)
    else:
        record, changed = beat, False
    refused = await _busy_ports(app, name, body, now)
    rows = agents.live(name)
    if agents.stale(name, body.tasks, rows) is None:
        assignments, freed = agents.assignments_of(rows), False
    else:
        assignments, freed = await run(agents.settle, name, body.tasks, now)
    if changed or freed or refused:
        app[SCHEDULER].poke()
    reply = ReportReply(
        acked_seq=record.acked_seq,
        assignments=assignments,
        report_interval_seconds=app[SETTINGS].report_interval_seconds,
        rendezvous_ports=app[SCHEDULER].ports.span,
    )
    return web.Response(text=reply.model_dump_json(), content_type="application/json")


def usable_address(advertised: str | None, peer: str | None) -> str | None:
    """The address other machines reach a machine at (its `MASTER_ADDR`, its network-derived
    site): what its agent advertises, never the TCP peer, which behind a proxy is the proxy's.
    None (flagged in `machines`) when it advertises none, or advertises loopback while it
    reports from elsewhere: its route to the coordinator is a local tunnel or proxy."""
    if advertised is None:
        return None
    if ipaddress.ip_address(advertised).is_loopback and not _loopback(peer):
        return None
    return advertised


def _loopback(peer: str | None) -> bool:
    try:
        return peer is not None and ipaddress.ip_address(peer).is_loopback
    except ValueError:
        return False


async def _busy_ports(app: web.Application, machine: str, body: AgentReport, now: datetime) -> bool:
    """Take back each port the agent found busy for its own worker 0 not yet started, and
    remember it and every other port the agent found in use as busy there; the next pass gives
    another. True when one was taken back."""
    if not body.busy_ports:
        return False
    database, ports = app[STORE].database, app[SCHEDULER].ports
    ports.found_in_use(machine, body.ports_in_use, now)
    busy = [(item.task_uid, item.port) for item in body.busy_ports]
    given_back = await database.run(refuse_ports, database, machine, busy)
    for port in given_back:
        ports.found_busy(machine, port, now)
        log.info("machine %s: rendezvous port %d is in use there; another is given", machine, port)
    return bool(given_back)


ROUTES = (
    Route(
        "PUT",
        "/api/v1/machines/{name}/report",
        put_report,
        "An agent's report; the reply lists the tasks this machine should run",
        "agent",
        body=AgentReport,
        response=ReportReply,
        errors={
            403: "not this machine's agent token",
            429: "a report for this machine is already being received; Retry-After says when",
        },
    ),
)
