"""No table cell breaks a word, at 1280 and at 420 px: a run's tasks with 8 GPUs each, the runs,
and the machines table at 5,000 machines (its cells also show their whole text, never cut).

A word is a run of characters between spaces; it is broken when the line boxes of its text (a
Range's client rects) sit on more than one line. The 5,000 machines are the map's answer as
the coordinator would give it (`big_map`), served to the page in place of the real one: the
table's layout is what is tested, and the console reads nothing else for it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .cluster import H100, Cluster
from .conftest import screenshot_path
from .demo import busy_demo, submit
from .pages import sign_in

pytestmark = pytest.mark.slow

BROKEN = """(selector) => {
  const found = [];
  for (const cell of document.querySelectorAll(selector)) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const word of node.data.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(node, word.index);
        range.setEnd(node, word.index + word[0].length);
        const boxes = [...range.getClientRects()].filter((r) => r.width > 0 && r.height > 0);
        const lines = new Set(boxes.map((r) => Math.round(r.top)));
        if (lines.size > 1) found.push(`${word[0]} (${lines.size} lines)`);
      }
    }
  }
  return found;
}"""

CUT = """(selector) => [...document.querySelectorAll(selector)]
  .filter((cell) => cell.scrollWidth > cell.clientWidth + 1)
  .map((cell) => `${cell.textContent} (${cell.scrollWidth} > ${cell.clientWidth} px)`)"""

SITES = ("fra-1", "ams-1")
RISK = "PCIe replays: 41/min, above 31/min for Gen5 x16"


def big_map(machines: int) -> dict[str, Any]:
    """`GET /api/v1/cluster/map`'s answer for `machines` machines of 8 H100s each: two sites,
    InfiniBand fabrics, RoCE, Ethernet, NVLink domains, racks of 8; some GPUs at risk, faulted or
    held; some machines cordoned, under pressure or Down."""
    runs = [{"name": f"train-{n}", "workspace": "vision"} for n in range(50)]
    listed = []
    for i in range(machines):
        kind = i % 10
        gpus = []
        for g in range(8):
            serial = i * 8 + g
            health = "healthy"
            if serial % 100 == 13:
                health = "at_risk"
            elif serial % 500 == 77:
                health = "faulted"
            gpus.append([g, 0, health, (i // 4) % 50 if i % 2 else None])
        listed.append(
            {
                "name": f"gpu-{i:04d}",
                "state": "Down" if i % 200 == 11 else "Up",
                "site": SITES[i % 2] if i % 50 != 7 else "10.0.3.0/24",
                "rack": f"rack-{i // 8}",
                "fabric": f"ib-{(i // 400) % 2}" if kind < 6 else None,
                "network": "InfiniBand" if kind < 6 else "RoCE" if kind < 8 else "Ethernet",
                "nvlink_domain": f"5d1c7a3e-0b4f-4f7e-9a53-{i // 9:012d}/1" if kind == 9 else None,
                "ethernet_mbps": 100_000 if i % 3 else 2_500,
                "cordoned": i % 100 == 5,
                "cordon_reason": "firmware update" if i % 100 == 5 else None,
                "conditions": ["MemoryPressure", "DiskPressure"] if i % 200 == 3 else [],
                "gpus": gpus,
            }
        )
    return {"models": [H100], "runs": runs, "machines": listed}


async def assert_whole(page: Any, selector: str, where: str) -> None:
    """No word of the cells `selector` finds sits on two lines."""
    assert await page.locator(selector).count() > 0, (where, selector)
    assert await page.evaluate(BROKEN, selector) == [], (where, selector)


async def test_no_table_cell_breaks_a_word(cluster: Cluster, page: Any) -> None:
    """A run of two 8-GPU tasks shows each task's GPUs as "8 GPUs" (the UUIDs on demand), and at
    1280 and 420 px no cell of its tasks, of the runs or of the 5,000 machines' table breaks a
    word; the machines table cuts none of its texts ("6 healthy, 2 at …") either."""
    await busy_demo(cluster)
    await submit(cluster, cluster.member, "wide", 16, "H100")
    await cluster.run_pass()
    wide = await cluster.ok("GET", "/api/v1/runs/wide", cluster.member)
    assert [len(t["assigned_gpu_ids"]) for t in wide["tasks"]] == [8, 8]
    answer = json.dumps(big_map(5000))

    async def fake_map(route: Any) -> None:
        await route.fulfill(status=200, content_type="application/json", body=answer)

    await sign_in(page, cluster, cluster.admin, "#map-holder", workspace="vision")
    for width in (1280, 420):
        await page.set_viewport_size({"width": width, "height": 900})
        await page.goto(f"{cluster.url}console/#/runs/wide")
        await page.wait_for_selector("#tasks tr[data-task='wide-1'] details")
        summaries = await page.locator("#tasks td.gpus summary").all_inner_texts()
        assert summaries == ["8 GPUs", "8 GPUs"]
        await assert_whole(page, "#tasks td, #tasks th", f"tasks at {width} px")
        await page.click("#tasks tr[data-task='wide-0'] summary")
        ids = await page.locator("#tasks tr[data-task='wide-0'] td.gpus li").all_inner_texts()
        assert ids == wide["tasks"][0]["assigned_gpu_ids"]
        await assert_whole(page, "#tasks td, #tasks th", f"tasks, UUIDs open, at {width} px")
        await page.screenshot(path=screenshot_path(f"tasks-{width}"), full_page=True)

        await page.goto(f"{cluster.url}console/#/runs")
        await page.wait_for_selector("#runs tr[data-run='wide']")
        await assert_whole(page, "#runs td, #runs th", f"runs at {width} px")

        await page.route("**/api/v1/cluster/map*", fake_map)
        await page.goto(f"{cluster.url}console/#/machines")
        await page.wait_for_selector("#machines-table tr.m-row")
        count = await page.locator("#machines-count").inner_text()
        assert count == "5,000 machines"
        cells = "#machines-table td, #machines-table th"
        await assert_whole(page, cells, f"machines at {width} px")
        assert await page.evaluate(CUT, "#machines-table tr.m-row td") == [], width
        # Further down: the cordoned, pressured, at-risk and Down machines among them.
        await page.fill('input[data-filter="name"]', "gpu-00")
        await page.locator("#machines-scroll").evaluate("(box) => { box.scrollTop = 400; }")
        await page.wait_for_selector("#machines-table tr[data-machine='gpu-0015']")
        await assert_whole(page, cells, f"machines scrolled at {width} px")
        assert await page.evaluate(CUT, "#machines-table tr.m-row td") == [], width
        await page.screenshot(path=screenshot_path(f"machines-5000-{width}"))
        await page.unroute("**/api/v1/cluster/map*")
