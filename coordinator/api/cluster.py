"""`GET /api/v1/cluster`: the cluster's name, its console's URL and the coordinator's version."""

from __future__ import annotations

from aiohttp import web

from astraeus.shared.views import ClusterView

from .auth import require_user
from .health import package_version
from .keys import SETTINGS
from .routes import Route


def console_url(request: web.Request) -> str:
    """`console_url` if set, else the console at the address the caller reached:
    `<scheme>://<Host header>/console/`, https when the coordinator serves TLS. The name the
    user typed (`ASTRA_API`), never the listen address: that may be an address only this
    machine knows, and "every interface" or port 0 is no address at all."""
    settings = request.app[SETTINGS]
    if settings.console_url:
        return settings.console_url
    return f"{settings.scheme}://{request.host}/console/"


async def cluster(request: web.Request) -> web.Response:
    require_user(request)
    name = request.app[SETTINGS].cluster_name
    view = ClusterView(name=name, console_url=console_url(request), version=package_version())
    return web.Response(text=view.model_dump_json(), content_type="application/json")


ROUTES = (
    Route(
        "GET",
        "/api/v1/cluster",
        cluster,
        "The cluster's name, console URL and version",
        "member",
        response=ClusterView,
    ),
)
