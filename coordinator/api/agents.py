"""`PUT /machines/{name}/report`: an agent's heartbeat, task updates and logs; the reply lists the
tasks its machine should run."""

from __future__ import annotations

from aiohttp import web

from astraeus.coordinator.store import Role
from astraeus.shared import AgentReport, ReportReply

from .auth import principal
from .errors import fail, read_model
from .keys import CLOCK, SCHEDULER, SETTINGS, STORE
from .routes import Route


async def put_report(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    who = principal(request)
    if who.role != Role.AGENT or who.machine != name:
        fail(403, f"this token may not report for machine {name!r}: use that machine's agent token")
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
    assignments, freed = agents.reply(name, body.tasks, now)
    if changed or freed:
        app[SCHEDULER].poke()
    reply = ReportReply(
        acked_seq=record.acked_seq,
        assignments=assignments,
        report_interval_seconds=app[SETTINGS].report_interval_seconds,
    )
    return web.Response(text=reply.model_dump_json(), content_type="application/json")


ROUTES = (
    Route(
        "PUT",
        "/api/v1/machines/{name}/report",
        put_report,
        "An agent's report; the reply lists the tasks this machine should run",
        "agent",
        body=AgentReport,
        response=ReportReply,
    ),
)
