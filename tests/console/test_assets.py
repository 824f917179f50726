"""The console's files: served from the package with the right types, public, self-contained."""

from __future__ import annotations

import re
from importlib import resources

import pytest
from yarl import URL

from astraeus.coordinator.console import ASSET_TYPES, asset_names, setup_console

from .cluster import Cluster

EXPECTED = {
    "admin.js",
    "api.js",
    "app.js",
    "asked.js",
    "choose.js",
    "console.css",
    "dom.js",
    "format.js",
    "forms.js",
    "index.html",
    "logo.svg",
    "machines.js",
    "map.js",
    "mapmodel.js",
    "newrun.js",
    "runpage.js",
    "runs.js",
    "tablemodel.js",
    "usage.js",
    "usagemodel.js",
    "vtable.js",
    "why.js",
    "words.js",
}

# A scheme followed by "//", or a protocol-relative "//host": anything fetched from elsewhere.
EXTERNAL = re.compile(r"""(?:\b[a-z][a-z0-9+.-]*:)?//[a-z0-9.-]+\.[a-z]{2,}""", re.IGNORECASE)
SVG_NAMESPACE = "http://www.w3.org/2000/svg"


def _text(name: str) -> str:
    return resources.files("astraeus.coordinator.console").joinpath(name).read_text("utf-8")


def test_package_ships_every_asset() -> None:
    """The package holds exactly the console's HTML, JS, CSS and SVG files."""
    assert set(asset_names()) == EXPECTED


@pytest.mark.parametrize("name", sorted(EXPECTED), ids=sorted(EXPECTED))
def test_no_asset_references_an_external_url(name: str) -> None:
    """No file names a URL on another host: nothing is fetched from elsewhere at run time."""
    text = _text(name).replace(SVG_NAMESPACE, "")
    assert EXTERNAL.findall(text) == []


@pytest.mark.parametrize("name", sorted(EXPECTED), ids=sorted(EXPECTED))
async def test_each_asset_is_served_with_its_content_type(cluster: Cluster, name: str) -> None:
    """`/console/<file>` answers 200 without a token, with the file's bytes and content type."""
    async with cluster.session.get(cluster.server.make_url(f"/console/{name}")) as response:
        assert response.status == 200
        assert response.content_type == ASSET_TYPES["." + name.rsplit(".", 1)[1]]
        assert await response.text() == _text(name)
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert "default-src 'self'" in response.headers["Content-Security-Policy"]


async def test_console_index_is_the_page(cluster: Cluster) -> None:
    """`/console/` serves index.html, which loads the app as a module from the same server."""
    async with cluster.session.get(cluster.server.make_url("/console/")) as response:
        assert response.status == 200
        assert response.content_type == "text/html"
        assert response.charset == "utf-8"
        body = await response.text()
    assert '<script type="module" src="app.js"></script>' in body


def test_index_preloads_every_module() -> None:
    """index.html preloads every module but app.js, so the browser fetches them at once instead
    of one import at a time."""
    preloaded = set(
        re.findall(r'<link rel="modulepreload" href="([a-z]+\.js)">', _text("index.html"))
    )
    assert preloaded == {name for name in EXPECTED if name.endswith(".js")} - {"app.js"}


@pytest.mark.parametrize("path", ["/", "/console"], ids=["root", "no-slash"])
async def test_root_redirects_to_the_console(cluster: Cluster, path: str) -> None:
    """`/` and `/console` redirect to `/console/`."""
    url = cluster.server.make_url(path)
    async with cluster.session.get(url, allow_redirects=False) as response:
        assert response.status == 302
        assert response.headers["Location"] == "/console/"


async def test_a_run_link_in_the_guides_form_opens_the_console_at_that_run(
    cluster: Cluster,
) -> None:
    """`/console/jobs/<cluster>/<run>` (what `astra astraeus run` prints) needs no token and
    redirects, relatively (a proxy's prefix is kept), to the console's page for that run, which
    then finds the run with the visitor's own token."""
    url = cluster.server.make_url("/console/jobs/gpu-east/finetune")
    async with cluster.session.get(url, allow_redirects=False) as response:
        assert response.status == 302
        location = response.headers["Location"]
    assert location == "../../#/jobs/gpu-east/finetune"
    assert str(URL("/o/acme/w/vision/jobs/gpu-east/finetune").join(URL(location))) == (
        "/o/acme/w/vision/#/jobs/gpu-east/finetune"
    )
    async with cluster.session.get(url) as followed:  # the browser's next request
        assert followed.status == 200
        assert followed.url.path == "/console/"
        assert '<script type="module" src="app.js"></script>' in await followed.text()


@pytest.mark.parametrize(
    ("path", "location"),
    [
        ("/console/jobs/a%20b/x%3Cy%3E", "../../#/jobs/a%20b/x%3Cy%3E"),
        ("/console/jobs/a%0D%0ASet-Cookie:%20x=1/r", "../../#/jobs/a%0D%0ASet-Cookie%3A%20x%3D1/r"),
        ("/console/jobs/..%2F..%2Fapi/r%23s", "../../#/jobs/..%2F..%2Fapi/r%23s"),
    ],
    ids=["space-and-angle", "header-injection", "slash-and-hash"],
)
async def test_a_run_links_names_are_escaped(cluster: Cluster, path: str, location: str) -> None:
    """Names in the link are user input: each stays one escaped segment of the fragment, never
    a header line, a path or another fragment (the console then shows the names it cannot
    open as Not found)."""
    url = URL(cluster.url.rstrip("/") + path, encoded=True)
    async with cluster.session.get(url, allow_redirects=False) as response:
        assert response.status == 302
        assert response.headers["Location"] == location
        assert "Set-Cookie" not in response.headers


@pytest.mark.parametrize(
    "name", ["serve.py", "__init__.py", "nothing.js", "..%2Fserve.py"], ids=str
)
async def test_other_files_are_not_served(cluster: Cluster, name: str) -> None:
    """Only the listed assets are served: never the package's Python, never a missing file."""
    async with cluster.session.get(cluster.server.make_url(f"/console/{name}")) as response:
        assert response.status == 404
        body = await response.json()
    assert body["error"].startswith("no console file named")


async def test_api_still_needs_a_token(cluster: Cluster) -> None:
    """Serving the console opens no API route: `/api/v1/runs` without a token is still 401."""
    async with cluster.session.get(cluster.server.make_url("/api/v1/runs")) as response:
        assert response.status == 401
        body = await response.json()
    assert body["error"] == "missing or unknown bearer token: send Authorization: Bearer <token>"


async def test_setting_up_twice_changes_nothing(cluster: Cluster) -> None:
    """A second `setup_console` on the same app adds no route and no middleware."""
    app = cluster.server.app
    routes, middlewares = len(app.router.routes()), len(app.middlewares)
    setup_console(app)
    assert (len(app.router.routes()), len(app.middlewares)) == (routes, middlewares)
