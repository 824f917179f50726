"""`GET /api/v1/cluster`: the cluster's name, its console's URL and the coordinator's version."""

from __future__ import annotations

from aiohttp import web

from astraeus.shared.views import ClusterView

from .auth import require_user
from .health import package_version
from .keys import SETTINGS
from .routes import Route

_EVERY_INTERFACE = ("0.0.0.0", "::", "[::]", "")  # noqa: S104 - compared, never bound


def console_url(request: web.Request) -> str:
    """`console_url` if set, else `http://<listen>/console/`; when the listen address is no
    address a browser can open (every interface, or port 0), the host the caller reached."""
    settings = request.app[SETTINGS]
    if settings.console_url:
        return settings.console_url
    if settings.host in _EVERY_INTERFACE or settings.port == 0:
        return f"{request.scheme}://{request.host}/console/"
    return f"http://{settings.listen}/console/"


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
