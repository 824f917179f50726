"""Serve the console's files from this package, before the API's bearer-token check."""

from __future__ import annotations

from importlib import resources
from urllib.parse import quote

from aiohttp import web
from aiohttp.typedefs import Handler

CONSOLE_PREFIX = "/console/"

ASSET_TYPES = {
    ".html": "text/html",
    ".js": "text/javascript",
    ".css": "text/css",
    ".svg": "image/svg+xml",
}
"""The only files served, by suffix, with their content types: never the package's Python."""

JOB_PATH = "jobs/{cluster}/{run}"
"""A run's page in the guide's form, relative to the console: `<console_url>jobs/<cluster>/<run>`
(what `astra astraeus run` prints)."""

_ROUTE_NAMES = frozenset(
    {"console-root", "console-bare", "console-index", "console-asset", "console-job"}
)

# The pages hold no secret: the token is typed in by the user and kept in the tab. The policy
# makes the browser refuse anything not from this server, so nothing is ever fetched elsewhere.
_HEADERS = {
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
        "frame-ancestors 'none'; form-action 'self'"
    ),
}


def asset_names() -> tuple[str, ...]:
    """The console's files shipped in this package, sorted."""
    package = resources.files(__package__ or "astraeus.coordinator.console")
    return tuple(
        sorted(
            entry.name
            for entry in package.iterdir()
            if entry.is_file() and _suffix(entry.name) in ASSET_TYPES
        )
    )


def _suffix(name: str) -> str:
    dot = name.rfind(".")
    return name[dot:] if dot > 0 else ""


def _load() -> dict[str, tuple[bytes, str]]:
    package = resources.files(__package__ or "astraeus.coordinator.console")
    return {
        name: (package.joinpath(name).read_bytes(), ASSET_TYPES[_suffix(name)])
        for name in asset_names()
    }


def setup_console(app: web.Application) -> None:
    """Serve the console at `/console/` and send `/` there. Call before the app starts; a
    second call changes nothing, so `create_app` may call it and tests may too.

    The files are public (they hold no data; every API call they make carries the user's
    token), so their routes answer before the app's other middlewares, the bearer check
    among them."""
    if "console-index" in app.router.named_resources():
        return
    files = _load()

    async def root(_request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(CONSOLE_PREFIX)

    async def index(_request: web.Request) -> web.StreamResponse:
        return _answer(files, "index.html")

    async def asset(request: web.Request) -> web.StreamResponse:
        return _answer(files, request.match_info["name"])

    async def job(request: web.Request) -> web.StreamResponse:
        # Not HTTPFound: it would pass the location through yarl, which unescapes a `%2F`.
        where = job_redirect(request.match_info["cluster"], request.match_info["run"])
        return web.Response(status=302, headers={"Location": where, **_HEADERS})

    app.router.add_get("/", root, name="console-root")
    app.router.add_get("/console", root, name="console-bare")
    app.router.add_get(CONSOLE_PREFIX, index, name="console-index")
    app.router.add_get(CONSOLE_PREFIX + "{name}", asset, name="console-asset")
    app.router.add_get(CONSOLE_PREFIX + JOB_PATH, job, name="console-job")
    app.middlewares.insert(0, _public_console)


def job_redirect(cluster: str, run: str) -> str:
    """Where `<console>/jobs/<cluster>/<run>` sends the browser: the console's own page,
    `#/jobs/<cluster>/<run>`, which checks the cluster's name and finds the run with the
    visitor's token.

    Relative (`../../`), so it lands on the console however a proxy prefixes its path
    (`console_url`); each name is escaped, so a name is never read as a path or a header."""
    return f"../../#/jobs/{quote(cluster, safe='')}/{quote(run, safe='')}"


def _answer(files: dict[str, tuple[bytes, str]], name: str) -> web.Response:
    found = files.get(name)
    if found is None:
        return web.json_response(
            {"error": f"no console file named {name!r}", "fields": []}, status=404
        )
    body, content_type = found
    charset = None if content_type == "image/svg+xml" else "utf-8"
    return web.Response(body=body, content_type=content_type, charset=charset, headers=_HEADERS)


@web.middleware
async def _public_console(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.match_info.route.name in _ROUTE_NAMES:
        return await request.match_info.handler(request)
    return await handler(request)
