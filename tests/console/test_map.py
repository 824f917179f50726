"""The cluster map in Chromium: the demo cluster's GPUs coloured by what they are, hover, click,
and, on a waiting run's page, the closest machine ringed and the hopeless ones greyed."""

from __future__ import annotations

from typing import Any

from .cluster import Cluster
from .conftest import screenshot_path
from .demo import AT_RISK_B1, XID, busy_demo, submit
from .pages import click_gpu, hover_gpu, map_marks, sign_in

H100 = "NVIDIA H100 80GB HBM3"
COLOURS = {"free": "#bfe3c8", "in_use": "#1f5fae", "at_risk": "#f0a500", "faulted": "#c0262d"}

# What the page's map model says, and the colour of the canvas at the middle of each GPU's cell.
DRAWN = """() => {
  const map = document.querySelector("#cluster-map");
  const model = map.mapModel;
  const canvas = map.querySelector("canvas");
  const ctx = canvas.getContext("2d");
  const hex = (v) => v.toString(16).padStart(2, "0");
  return model.cells.map((cell) => {
    const row = model.machines[cell.machine].row;
    const half = Math.floor(model.cell / 2);
    const [r, g, b] = ctx.getImageData(cell.x + half, cell.y + half, 1, 1).data;
    return [row.name, row.gpus[cell.gpu].index, cell.status, `#${hex(r)}${hex(g)}${hex(b)}`];
  });
}"""


async def expected_statuses(cluster: Cluster) -> list[list[Any]]:
    """Each GPU's colour worked out from each machine's own detail (health, and the task holding
    it), independently of the map's endpoint."""
    listed = await cluster.ok("GET", "/api/v1/machines")
    expected = []
    for machine in listed["machines"]:
        detail = await cluster.ok("GET", f"/api/v1/machines/{machine['name']}")
        for gpu in detail["gpus"]:
            status = {"faulted": "faulted", "at_risk": "at_risk"}.get(gpu["health"])
            status = status or ("in_use" if gpu["task"] else "free")
            expected.append([machine["name"], gpu["index"], status, COLOURS[status]])
    return sorted(expected)


async def test_map_draws_the_demo_cluster_with_each_gpus_colour(
    cluster: Cluster, page: Any
) -> None:
    """An admin lands on the map: every demo GPU is drawn in the colour of its state (free, in
    use, at risk, faulted), in the page's model and on the canvas; hover names the machine, GPU,
    model and run; click opens the machine."""
    from playwright.async_api import expect

    await busy_demo(cluster)
    await sign_in(page, cluster, cluster.admin, "#cluster-map canvas[data-drawn]")
    assert page.url.endswith("#/map") or page.url.endswith("/console/")
    drawn = sorted(await page.evaluate(DRAWN))
    assert drawn == await expected_statuses(cluster)
    assert {status for _, _, status, _ in drawn} == set(COLOURS)
    assert await page.locator("#map-legend .swatch").all_inner_texts() == [
        "Free 27",
        "In use 12",
        "At risk 2",
        "Faulted 1",
        "Down 1",
        "Cordoned 1",
        "Under pressure 1",
    ]
    # Free means usable by a run now: idle GPUs of cordoned and pressured machines come apart.
    apart = await page.locator("#map-legend .idle-apart").inner_text()
    assert apart == (
        "Idle, no run can use them now: 2 on cordoned machines, 8 on machines under pressure"
    )
    await page.screenshot(path=screenshot_path("map"), full_page=True)

    train = await cluster.ok("GET", "/api/v1/runs/train?workspace=vision")
    machine = train["tasks"][0]["machine"]
    await hover_gpu(page, machine, 0)
    assert machine == "ib-a1"
    await expect(page.locator(".map-tip")).to_have_text(
        f"{machine} · rack-a1UpGPU 0: {H100}held by run train (workspace vision)"
    )
    await page.screenshot(path=screenshot_path("map-hover"))
    # At risk or faulted says why: the GPU's signals, read from its machine once hovered.
    await hover_gpu(page, "ib-b1", 1)
    await expect(page.locator(".map-tip")).to_contain_text(f"At risk: {AT_RISK_B1}; free")
    await hover_gpu(page, "roce-2", 1)
    await expect(page.locator(".map-tip")).to_contain_text(f"Faulted: {XID['message']}; free")
    await hover_gpu(page, machine, 0)
    await click_gpu(page, machine, 0)
    await page.wait_for_url(f"**#/machines/{machine}")
    await expect(page.locator("#machine-card h1")).to_have_text(machine)


async def test_a_member_sees_a_run_of_another_workspace_unnamed(
    cluster: Cluster, page: Any
) -> None:
    """A member opens the map from its tab; a GPU another workspace's run holds says "a run of
    another workspace", and the map's answer names no run of another workspace."""
    from playwright.async_api import expect

    await busy_demo(cluster)
    answer = await cluster.ok("GET", "/api/v1/cluster/map", cluster.member)
    assert sorted(run["name"] or "" for run in answer["runs"]) == ["", "train"]
    await sign_in(page, cluster, cluster.member, "#runs")
    await page.click("nav >> text=Map")
    await page.wait_for_selector("#cluster-map canvas[data-drawn]")
    sweep = await cluster.ok("GET", "/api/v1/machines/nvl-1")
    assert [gpu["task"] is not None for gpu in sweep["gpus"]] == [True] * 4
    await hover_gpu(page, "nvl-1", 2)
    await expect(page.locator(".map-tip")).to_have_text(
        "nvl-1 · nvl72-1UpGPU 2: NVIDIA GB200held by a run of another workspace"
    )


async def test_a_waiting_runs_map_rings_the_closest_machine_and_greys_the_others(
    cluster: Cluster, page: Any
) -> None:
    """On a waiting run's page the map rings the closest machine (short only on room) and greys
    each machine that can never take the run as asked: another model, under pressure, Down."""
    from playwright.async_api import expect

    await busy_demo(cluster)
    for name in ("hold-2", "hold-3", "waiting"):
        await submit(cluster, cluster.member, name, 8, "H100")
        await cluster.run_pass()
    task = await cluster.ok("GET", "/api/v1/tasks/waiting-0", cluster.member)
    placement = task["placement"]
    closest = placement["closest"]
    assert closest in {"ib-a1", "ib-a2", "ib-b1"}

    await sign_in(page, cluster, cluster.member, "#runs")
    await page.goto(f"{cluster.url}console/#/runs/waiting")
    await page.wait_for_selector("#run-map canvas[data-drawn]")
    never = ["eth-1", "eth-2", "ib-b2", "nvl-1", "nvl-2", "roce-1", "roce-2", "spare-1"]
    assert await map_marks(page, "#run-map") == {closest: "closest"} | dict.fromkeys(never, "never")
    await expect(page.locator("#why-map-caption")).to_have_text(
        f"Ringed: {closest}, the closest machine. "
        "Greyed: 8 machines that can never take this run as asked."
    )
    ring = await page.evaluate(
        """(name) => {
            const map = document.querySelector("#run-map");
            const tile = map.mapModel.machines.find((m) => m.row.name === name);
            const [r, g, b] = map.querySelector("canvas").getContext("2d")
                .getImageData(tile.x - 2, tile.y + Math.floor(tile.h / 2), 1, 1).data;
            return [r, g, b];
        }""",
        closest,
    )
    assert ring == [0x11, 0x18, 0x27]
    await hover_gpu(page, closest, None, "#run-map")
    await expect(page.locator("#run-map .map-tip")).to_contain_text(
        "Closest: falls short only on room"
    )
    groups = await page.locator("#why-groups li").all_inner_texts()
    assert groups == [
        "5 machines: no H100 GPU (eth-1, nvl-1, nvl-2 and 2 more)",
        "3 machines: insufficient gpus: need 4, 0 free and usable (ib-a1, ib-a2, ib-b1)",
        "1 machine: machine has not reported (spare-1)",
        "1 machine: machine is cordoned: firmware update (eth-2)",
        "1 machine: under pressure: MemoryPressure (ib-b2)",
    ]
    await page.screenshot(path=screenshot_path("run-map"), full_page=True)
