"""`PUT /machines/{name}/report`: an agent's heartbeat, task updates and logs; the reply lists the
tasks its machine should run. Refused at once (503, `Retry-After`) while the coordinator runs
too far behind (`overload.py`), its machine still counting as heard."""

from __future__ import annotations

import ipaddress

from aiohttp import web

from astraeus.coordinator.metrics import SHED_LOOP, SHED_WRITER
from astraeus.coordinator.reports import OverloadError
from astraeus.coordinator.store import Role, StorageError
from astraeus.shared import AgentReport, ReportReply

from .auth import principal
from .errors import ApiError, fail, read_model
from .keys import CLOCK, OVERLOAD, REJECTIONS, REPORTING, REPORTS, SCHEDULER, SETTINGS
from .overload import retry_after
from .routes import Route


async def put_report(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    who = principal(request)
    if who.role != Role.AGENT or who.machine != name:
        owner = f"machine {who.machine!r}" if who.role == Role.AGENT else f"a {who.role}"
        request.app[REJECTIONS].note(
            "another machine's token", request.remote, f"for {name!r} with the token of {owner}"
        )
        fail(403, f"this token may not report for machine {name!r}: use that machine's agent token")
    app = request.app
    interval = app[SETTINGS].report_interval_seconds
    reporting = app[REPORTING]
    if name in reporting:
        # An agent sends one report at a time; more are a loop or an attack on the event loop.
        raise ApiError(
            429,
            f"a report for machine {name!r} is already being received: send one at a time",
            headers={"Retry-After": retry_after(interval)},
        )
    overload = app[OVERLOAD]
    behind = overload.loop_behind()
    if behind is not None:
        # Refused before its body is read: an overloaded loop spends the least on it.
        app[REPORTS].records.heard(name, app[CLOCK].now())
        raise overload.refuse(behind, SHED_LOOP)
    reporting.add(name)
    try:
        return await _receive(request, name)
    except OverloadError as error:
        raise overload.refuse(error, SHED_WRITER) from None
    except StorageError as error:
        raise overload.storage_fault(error) from None
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
            503: "the coordinator is overloaded, or its database takes no writes: the report"
            " is not processed (its machine still counts as heard); Retry-After says when",
        },
    ),
)
