"""Layout: nothing of a signed-in user shows while signed out; a phone's 420 px is enough."""

from __future__ import annotations

from typing import Any

from .cluster import Cluster
from .conftest import screenshot_path
from .demo import busy_demo, submit
from .pages import sign_in

LONG = "a-run-whose-name-is-as-long-as-a-name-may-be-sixty-three-chars"
OVERFLOW = "document.documentElement.scrollWidth - document.documentElement.clientWidth"


async def test_signed_out_pages_show_no_nav_and_no_sign_out(cluster: Cluster, page: Any) -> None:
    """Signed out, whatever page the address names, only the sign-in form shows: no nav links,
    no Sign out, no workspace."""
    routes = ("", "#/map", "#/runs", "#/new", "#/machines", "#/machines/gpu-01", "#/runs/x")
    for route in (*routes, "jobs/gpu-east/x"):
        await page.goto(f"{cluster.url}console/{route}")
        await page.wait_for_selector("#token")
        for link in ("Map", "Runs", "New run", "Machines"):
            assert not await page.locator(f"nav >> text={link}").is_visible(), (route, link)
        assert not await page.locator("#sign-out").is_visible(), route
        assert await page.locator("#who").inner_text() == ""
    await page.screenshot(path=screenshot_path("signed-out"))


async def test_the_pages_fit_a_420_pixel_screen(cluster: Cluster, page: Any) -> None:
    """At 420 px wide the runs page (long names, long reasons) scrolls only down, never
    sideways; so do the map, the machines page, a machine, a run and New run (the table
    scrolls inside its own box)."""
    await busy_demo(cluster)
    await submit(cluster, cluster.member, LONG, 8, "NVIDIA H100 80GB HBM3 with a long name")
    await cluster.run_pass()
    await page.set_viewport_size({"width": 420, "height": 900})
    await sign_in(page, cluster, cluster.member, f'#runs tr[data-run="{LONG}"]')
    assert await page.evaluate(OVERFLOW) == 0
    await page.screenshot(path=screenshot_path("runs-420"), full_page=True)
    pages = {
        "#/map": "#cluster-map canvas[data-drawn]",
        "#/machines": "#machines-table tr.m-row",
        "#/machines/ib-b1": "#machine-card",
        f"#/runs/{LONG}": "#why",
        "#/new": "#model[data-loaded]",
    }
    for route, ready in pages.items():
        await page.goto(f"{cluster.url}console/{route}")
        await page.wait_for_selector(ready, state="attached")
        assert await page.evaluate(OVERFLOW) == 0, route
    await page.goto(f"{cluster.url}console/#/map")
    await page.wait_for_selector("#cluster-map canvas[data-drawn]")
    await page.screenshot(path=screenshot_path("map-420"), full_page=True)
