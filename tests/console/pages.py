"""Steps in the console a test takes as a person would: sign in, point at a GPU on the map."""

from __future__ import annotations

from typing import Any

from .cluster import Cluster

MAP = "#cluster-map"


async def sign_in(page: Any, cluster: Cluster, token: str, ready: str, workspace: str = "") -> None:
    """Sign in with `token` (and `workspace`), then wait for `ready` on the page that opens."""
    await page.goto(cluster.url)
    await page.fill("#token", token)
    if workspace:
        await page.fill("#workspace", workspace)
    await page.click("#sign-in")
    await page.wait_for_selector(ready)


async def map_marks(page: Any, map_id: str = MAP) -> dict[str, str]:
    """The marks the map drew: machine name → closest or never."""
    marks: dict[str, str] = await page.evaluate(
        "(id) => document.querySelector(id).mapMarks", map_id
    )
    return marks


async def cell_point(
    page: Any, machine: str, index: int | None, map_id: str = MAP
) -> tuple[float, float]:
    """Where, in the viewport, the middle of a machine's GPU cell is (or of its tile's name
    strip, when `index` is None)."""
    point: list[float] = await page.evaluate(
        """([id, name, index]) => {
            const map = document.querySelector(id);
            const model = map.mapModel;
            const box = map.querySelector("canvas").getBoundingClientRect();
            const tile = model.machines.find((m) => m.row.name === name);
            if (index === null) return [box.left + tile.x + tile.w / 2, box.top + tile.y + 4];
            const cell = model.cells.find((c) => {
                const row = model.machines[c.machine].row;
                return row.name === name && row.gpus[c.gpu].index === index;
            });
            return [box.left + cell.x + model.cell / 2, box.top + cell.y + model.cell / 2];
        }""",
        [map_id, machine, index],
    )
    return point[0], point[1]


async def hover_gpu(page: Any, machine: str, index: int | None, map_id: str = MAP) -> None:
    """Move the pointer onto a GPU's cell (or onto the machine, `index` None)."""
    await page.locator(map_id).scroll_into_view_if_needed()
    x, y = await cell_point(page, machine, index, map_id)
    await page.mouse.move(x, y)


async def click_gpu(page: Any, machine: str, index: int, map_id: str = MAP) -> None:
    x, y = await cell_point(page, machine, index, map_id)
    await page.mouse.click(x, y)
