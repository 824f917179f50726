"""`/healthz` (no token), `/metrics` (admin) and the OpenAPI document."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from aiohttp import web

from .auth import require_admin, require_user
from .keys import CLOCK, METRICS, SCHEDULER, STORE
from .openapi import document
from .routes import Route


def package_version() -> str:
    try:
        return version("astraeus")
    except PackageNotFoundError:
        return "0+unknown"


async def healthz(request: web.Request) -> web.Response:
    request.app[STORE].database.read("SELECT 1")
    return web.json_response({"status": "ok"})


async def metrics(request: web.Request) -> web.Response:
    require_admin(request)
    app = request.app
    text = app[METRICS].render(app[STORE], app[CLOCK].now(), app[SCHEDULER].down_after)
    return web.Response(
        text=text,
        content_type="text/plain",
        charset="utf-8",
        headers={"X-Content-Format": "prometheus-0.0.4"},
    )


async def openapi(request: web.Request) -> web.Response:
    require_user(request)
    from .app import all_routes  # the document lists every route, this one included

    return web.json_response(document(all_routes(), package_version()))


ROUTES = (
    Route("GET", "/healthz", healthz, "Liveness: the database answers", "anyone"),
    Route("GET", "/metrics", metrics, "Prometheus text format", "admin"),
    Route("GET", "/api/v1/openapi.json", openapi, "This document", "member"),
)
