"""The aiohttp application: `create_app(settings, *, store, clock)`."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from concurrent.futures import ProcessPoolExecutor

from aiohttp import web

from astraeus.coordinator.machine_records import MachineRecords
from astraeus.coordinator.metrics import Metrics
from astraeus.coordinator.reports import Reports
from astraeus.coordinator.scheduler import Scheduler, SessionFactory
from astraeus.coordinator.scheduler.port_grants import Ports
from astraeus.coordinator.settings import Settings
from astraeus.coordinator.store import Store
from astraeus.shared.clock import Clock

from ..console import setup_console
from . import admin, agents, cluster, cluster_map, health, machines, runs, usage
from .auth import bearer_auth
from .errors import json_errors
from .keys import (
    CLOCK,
    METRICS,
    OVERLOAD,
    RECORDS,
    REJECTIONS,
    REPORTING,
    REPORTS,
    SCHEDULER,
    SETTINGS,
    STORE,
)
from .overload import Overload
from .rejections import Rejections
from .routes import Route


def all_routes() -> tuple[Route, ...]:
    return (
        *health.ROUTES,
        *cluster.ROUTES,
        *cluster_map.ROUTES,
        *runs.ROUTES,
        *machines.ROUTES,
        *agents.ROUTES,
        *admin.ROUTES,
        *usage.ROUTES,
    )


def create_app(
    settings: Settings,
    *,
    store: Store,
    clock: Clock,
    records: MachineRecords | None = None,
    session_factory: SessionFactory | None = None,
    pass_pool: ProcessPoolExecutor | None = None,
) -> web.Application:
    """The coordinator's app. The scheduler loop runs in the background if `settings.scheduler`;
    it is reachable as `app[SCHEDULER]` either way, so tests can run passes themselves.
    `records`: the machines loaded before (read from `store` when not given);
    `session_factory` replaces the placement engine (tests of the queue rules pass a fake);
    `pass_pool` is a pass worker started before (`scheduler.worker_pool`)."""
    app = web.Application(
        middlewares=[json_errors, bearer_auth], client_max_size=settings.max_body_bytes
    )
    app[SETTINGS] = settings
    app[STORE] = store
    app[CLOCK] = clock
    app[METRICS] = Metrics()
    app[REPORTING] = set()
    app[RECORDS] = records if records is not None else MachineRecords(store, settings.access_labels)
    app[REPORTS] = Reports(
        store, app[RECORDS], Ports(settings.port_range), settings.max_report_delay_seconds
    )
    app[OVERLOAD] = Overload(settings, app[METRICS])
    app[REJECTIONS] = Rejections(clock)
    app[SCHEDULER] = Scheduler(
        settings,
        store,
        clock,
        app[METRICS],
        app[REPORTS],
        session_factory=session_factory,
        pool=pass_pool,
    )
    for route in all_routes():
        app.router.add_route(route.method, route.path, route.handler)
    setup_console(app)
    app.cleanup_ctx.append(_writer_thread)
    app.cleanup_ctx.append(_loop_delay)
    app.cleanup_ctx.append(_scheduler_loop)
    return app


async def _writer_thread(app: web.Application) -> AsyncIterator[None]:
    """The database's writer thread runs while the app serves; at cleanup (after the scheduler
    has stopped) every write queued is done before it ends."""
    database = app[STORE].database
    database.start_writer()
    yield
    database.stop_writer()


async def _loop_delay(app: web.Application) -> AsyncIterator[None]:
    """The event loop measures how far behind it runs while the app serves (`overload.py`)."""
    ticking = asyncio.create_task(app[OVERLOAD].loop.run())
    yield
    ticking.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await ticking


async def _scheduler_loop(app: web.Application) -> AsyncIterator[None]:
    scheduler = app[SCHEDULER]
    if app[SETTINGS].scheduler:
        scheduler.start()
        scheduler.poke()  # pending runs resume at once after a restart
        await scheduler.warmed()  # listening once dry runs read a built live state
    yield
    await scheduler.stop()
