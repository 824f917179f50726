"""`PUT /machines/{name}/report`: an agent's heartbeat, task updates and logs; the reply lists the
tasks its machine should run."""

from __future__ import annotations

import logging
import math
from datetime import datetime

from aiohttp import web

from astraeus.coordinator.store import Role
from astraeus.coordinator.store.ports import refuse_port
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
    agents, now = app[STORE].agents, app[CLOCK].now()
    record, changed = agents.apply(body, request.remote, now)
    refused = _busy_ports(app, name, body, now)
    assignments, freed = agents.reply(name, body.tasks, now)
    if changed or freed or refused:
        app[SCHEDULER].poke()
    reply = ReportReply(
        acked_seq=record.acked_seq,
        assignments=assignments,
        report_interval_seconds=app[SETTINGS].report_interval_seconds,
    )
    return web.Response(text=reply.model_dump_json(), content_type="application/json")


def _busy_ports(app: web.Application, machine: str, body: AgentReport, now: datetime) -> bool:
    """Take back each port the agent found busy for its own worker 0 not yet started, and
    remember it as busy there; the next pass gives another. True when one was taken back."""
    database, ports = app[STORE].database, app[SCHEDULER].ports
    refused = False
    for busy in body.busy_ports:
        if refuse_port(database, machine, busy.task_uid, busy.port):
            ports.found_busy(machine, busy.port, now)
            log.info(
                "machine %s: rendezvous port %d is in use there; another is given",
                machine,
                busy.port,
            )
            refused = True
    return refused


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
