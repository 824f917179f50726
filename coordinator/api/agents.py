"""`PUT /machines/{name}/report`: an agent's heartbeat, task updates and logs; the reply lists the
tasks its machine should run."""

from __future__ import annotations

import ipaddress
import math

from aiohttp import web

from astraeus.coordinator.store import Role
from astraeus.shared import AgentReport, ReportReply

from .auth import principal
from .errors import ApiError, fail, read_model
from .keys import CLOCK, REPORTING, REPORTS, SCHEDULER, SETTINGS
from .routes import Route


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
    address = usable_address(body.report.advertise_address, request.remote)
    received = await app[REPORTS].receive(body, address, app[CLOCK].now())
    if received.poke:
        app[SCHEDULER].poke()
    reply = ReportReply(
        acked_seq=received.record.acked_seq,
        assignments=received.assignments,
        report_interval_seconds=app[SETTINGS].report_interval_seconds,
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
