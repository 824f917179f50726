"""`/healthz` (no token), `/metrics` (admin) and the OpenAPI document."""

from __future__ import annotations

import sqlite3
from importlib.metadata import PackageNotFoundError, version

from aiohttp import web

from astraeus.coordinator.store.faults import StorageError

from .auth import require_admin, require_user
from .errors import RETRY_AFTER
from .keys import CLOCK, METRICS, RECORDS, SCHEDULER, STORE
from .openapi import document
from .routes import Route


def package_version() -> str:
    try:
        return version("astraeus")
    except PackageNotFoundError:
        return "0+unknown"


async def healthz(request: web.Request) -> web.Response:
    """200 while the database answers reads and takes writes; 503 naming the fault otherwise.

    While a write fault lasts, a small write is tried again (at most once a second), so the
    answer turns 200 as soon as the fault clears."""
    database = request.app[STORE].database
    try:
        database.read("SELECT 1")
    except (sqlite3.Error, StorageError) as error:  # StorageError: a server out of reach
        return _unhealthy(f"database is not readable: {error}")
    fault = database.fault
    if fault is not None:
        fault = await database.run(database.check)  # may try a write
    if fault is not None:
        return _unhealthy(fault.error, since=fault.since.isoformat())
    return web.json_response({"status": "ok"})


def _unhealthy(error: str, **extra: str) -> web.Response:
    body = {"status": "failing", "error": error, "fields": [], **extra}
    return web.json_response(body, status=503, headers={"Retry-After": str(RETRY_AFTER)})


async def metrics(request: web.Request) -> web.Response:
    require_admin(request)
    app = request.app
    scheduler = app[SCHEDULER]
    text = app[METRICS].render(
        app[STORE], app[RECORDS], app[CLOCK].now(), scheduler.down_after, scheduler.heard_since
    )
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
    Route(
        "GET",
        "/healthz",
        healthz,
        "Health: 200 while the database answers and takes writes, 503 naming the fault",
        "anyone",
    ),
    Route("GET", "/metrics", metrics, "Prometheus text format", "admin"),
    Route("GET", "/api/v1/openapi.json", openapi, "This document", "member"),
)
