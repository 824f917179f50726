"""The machines table (sort, filter, search), a machine's page, and the admin's controls there."""

from __future__ import annotations

from typing import Any

from .cluster import Cluster
from .conftest import screenshot_path
from .demo import AT_RISK_B1, busy_demo
from .pages import sign_in

H100 = "NVIDIA H100 80GB HBM3"
NAMES = [
    "eth-1",
    "eth-2",
    "ib-a1",
    "ib-a2",
    "ib-b1",
    "ib-b2",
    "nvl-1",
    "nvl-2",
    "roce-1",
    "roce-2",
    "spare-1",
]


async def shown(page: Any) -> list[str]:
    """The machines the table shows, top to bottom."""
    rows = page.locator("#machines-table tbody tr.m-row")
    return [
        str(name) for name in await rows.evaluate_all("(rs) => rs.map((r) => r.dataset.machine)")
    ]


async def cells(page: Any, machine: str) -> list[str]:
    row = page.locator(f'#machines-table tr[data-machine="{machine}"] td')
    return [str(text) for text in await row.all_inner_texts()]


async def test_the_table_sorts_filters_and_searches(cluster: Cluster, page: Any) -> None:
    """One row per machine with state, site, fabric (Ethernet for plain Ethernet), Ethernet
    speed, rack, NVLink domain, GPUs free/total by model, health, conditions and cordon; a
    heading sorts, again reverses; each column filters; the search box finds by name; a name
    opens the machine."""
    from playwright.async_api import expect

    await busy_demo(cluster)
    await sign_in(page, cluster, cluster.member, "#runs")
    await page.click("nav >> text=Machines")
    await page.wait_for_selector("#machines-table tr.m-row")
    assert await shown(page) == NAMES
    await expect(page.locator("#machines-count")).to_have_text("11 machines")
    train = await cluster.ok("GET", "/api/v1/runs/train", cluster.member)
    busy = train["tasks"][0]["machine"]
    assert busy == "ib-a1"
    assert await cells(page, busy) == [
        busy, "Up", "lab", "ib-a", "100 Gb/s", "rack-a1", "—", f"0/8 {H100}", "8 healthy", "—",
        "—",
    ]  # fmt: skip
    assert await cells(page, "eth-2") == [
        "eth-2", "Up", "lab", "Ethernet", "100 Gb/s", "rack-e1", "—", "0/2 NVIDIA A10 (2 idle)",
        "2 healthy", "—", "Cordoned: firmware update",
    ]  # fmt: skip
    assert (await cells(page, "ib-b1"))[8] == "6 healthy, 2 at risk"
    assert (await cells(page, "ib-b2"))[9] == "MemoryPressure"
    assert (await cells(page, "nvl-1"))[3:7] == ["Ethernet", "100 Gb/s", "nvl72-1", "5d1c7a3e/1"]
    assert (await cells(page, "roce-2"))[3:5] == ["RoCE", "200 Gb/s"]
    assert (await cells(page, "spare-1"))[1:5] == ["Down", "—", "Ethernet", "—"]
    await page.screenshot(path=screenshot_path("machines-table"), full_page=True)

    await page.click('button[data-sort="gpus"]')
    # Fewest free first (a cordoned or pressured machine has none: free means usable by a run
    # now), then fewest in all; names break ties.
    assert await shown(page) == [
        "spare-1", "eth-2", "nvl-1", "ib-a1", "ib-b2", "eth-1", "roce-2", "nvl-2", "roce-1",
        "ib-a2", "ib-b1",
    ]  # fmt: skip
    await page.click('button[data-sort="gpus"]')
    assert await shown(page) == [
        "ib-a2", "ib-b1", "nvl-2", "roce-1", "roce-2", "eth-1", "ib-a1", "ib-b2", "nvl-1",
        "eth-2", "spare-1",
    ]  # fmt: skip
    await expect(page.locator('th:has(button[data-sort="gpus"])')).to_have_attribute(
        "aria-sort", "descending"
    )

    await page.click('button[data-sort="name"]')
    await page.fill('input[data-filter="fabric"]', "ib-")
    assert await shown(page) == ["ib-a1", "ib-a2", "ib-b1", "ib-b2"]
    await expect(page.locator("#machines-count")).to_have_text("4 of 11 machines")
    await page.fill('input[data-filter="health"]', "at risk")
    assert await shown(page) == ["ib-b1"]
    await page.fill('input[data-filter="fabric"]', "")
    await page.fill('input[data-filter="health"]', "")
    await page.fill("#machine-search", "ROCE")
    assert await shown(page) == ["roce-1", "roce-2"]
    await page.fill("#machine-search", "nothing-like-it")
    await expect(page.locator("#machines-table tbody")).to_have_text("No machine matches.")
    await page.fill("#machine-search", "ib-b1")
    await page.click('#machines-table a:text-is("ib-b1")')
    await page.wait_for_url("**#/machines/ib-b1")
    gpu = page.locator('#gpus tr[data-index="1"]')
    await expect(gpu.locator(".badge")).to_have_text("At risk")
    await expect(gpu.locator(".signals")).to_have_text(AT_RISK_B1)


async def test_a_machines_page_holds_what_its_card_showed(cluster: Cluster, page: Any) -> None:
    """A machine's page shows its state, whether it accepts runs and why not, site, rack,
    fabric, NVLink domain, GPUs and models, health, CPU, memory, runs and conditions."""
    from playwright.async_api import expect

    await busy_demo(cluster)
    await sign_in(page, cluster, cluster.member, "#runs")

    async def facts(machine: str) -> dict[str, str]:
        await page.goto(f"{cluster.url}console/#/machines/{machine}")
        card = page.locator(f'#machine[data-machine="{machine}"] #machine-card')
        await expect(card.locator("h1")).to_have_text(machine)
        keys = await card.locator("dt").all_inner_texts()
        return dict(zip(keys, await card.locator("dd").all_inner_texts(), strict=True))

    eth = await facts("eth-2")
    assert eth["Accepting runs"] == "Cordoned: firmware update"
    assert eth["Ethernet"] == "100 Gb/s"
    assert (eth["Fabric"], eth["Site"], eth["Rack"], eth["NVLink domain"]) == (
        "Ethernet", "lab", "rack-e1", "—"
    )  # fmt: skip
    # Cordoned: its idle GPUs are no run's now, so none is free (free means usable by a run).
    assert eth["GPU models"] == "0 of 2 free NVIDIA A10 (2 idle)"
    assert eth["GPUs"] == "0 free of 2 (0 allocated; 2 idle, but the machine takes no runs now)"
    nvl = await facts("nvl-1")
    assert (nvl["NVLink domain"], nvl["Fabric"], nvl["Health"]) == (
        "5d1c7a3e/1",
        "Ethernet",
        "All healthy",
    )
    ib = await facts("ib-b2")
    assert (ib["Fabric"], ib["Conditions"], ib["Accepting runs"]) == (
        "ib-b",
        "MemoryPressure",
        "Yes",
    )
    await expect(page.locator("#gpus tr[data-gpu]")).to_have_count(8)
    await expect(page.locator("#gpus .rdma-table tbody tr")).to_have_count(4)
    await page.screenshot(path=screenshot_path("machine"), full_page=True)


async def test_an_admin_cordons_from_the_console_and_a_member_sees_no_admin_controls(
    cluster: Cluster, page: Any
) -> None:
    """An admin cordons a machine with a reason, sees the API's field error beside the reason
    when it is too long, uncordons it, sets a label and reserves the machine; a member's page of
    the same machine has none of these controls."""
    from playwright.async_api import expect

    await busy_demo(cluster)
    await sign_in(page, cluster, cluster.admin, "#cluster-map")
    await page.goto(f"{cluster.url}console/#/machines/ib-a2")
    await page.wait_for_selector("#admin #cordon-form")
    reason = page.locator('#cordon-form .field[data-field="reason"] .field-error')
    await page.fill("#cordon-reason", "x" * 1025)
    await page.click("#cordon")
    await expect(reason).to_have_text("String should have at most 1024 characters.")
    await page.fill("#cordon-reason", "drain for RMA")
    await page.click("#cordon")
    accepting = page.locator('#machine-card dt:text-is("Accepting runs") + dd')
    await expect(accepting).to_have_text("Cordoned: drain for RMA")
    machine = await cluster.ok("GET", "/api/v1/machines/ib-a2")
    assert (machine["cordoned"], machine["cordon_reason"]) == (True, "drain for RMA")
    await page.screenshot(path=screenshot_path("admin-cordoned"), full_page=True)
    await page.click("#uncordon")
    await expect(accepting).to_have_text("Yes")
    assert (await cluster.ok("GET", "/api/v1/machines/ib-a2"))["cordoned"] is False

    await page.click("#add-label")
    await page.locator("#labels-form .label-key").last.fill("team")
    await page.locator("#labels-form .label-value").last.fill("vision")
    await page.click("#save-labels")
    await expect(page.locator('#labels tr[data-label="team"] td').nth(2)).to_have_text("admin")
    assert (await cluster.ok("GET", "/api/v1/machines/ib-a2"))["labels"]["team"] == "vision"

    await page.select_option("#reserve-workspace", "vision")
    await page.click("#reserve")
    beside = page.locator('#reserve-form .field[data-field="workspace"] .field-error')
    await expect(beside).to_have_text("A reservation for a workspace needs a start and an end.")
    await page.screenshot(path=screenshot_path("admin-reserve-error"), full_page=True)
    await page.select_option("#reserve-workspace", "")
    await page.fill("#reserve-labels", "team=vision")
    await page.click("#reserve")
    await expect(page.locator("#reserve-form li[data-reservation]")).to_have_text(
        "Reserved for team=vision Remove"
    )
    stored = await cluster.ok("GET", "/api/v1/machines/ib-a2/reservations")
    assert [r["labels"] for r in stored["reservations"]] == [{"team": "vision"}]

    await page.click("#sign-out")
    await sign_in(page, cluster, cluster.member, "#runs")
    await page.goto(f"{cluster.url}console/#/machines/ib-a2")
    await expect(page.locator("#machine-card h1")).to_have_text("ib-a2")
    await expect(page.locator("#reservations")).to_have_text("Reserved for team=vision")
    for control in ("#admin", "#cordon", "#uncordon", "#save-labels", "#reserve"):
        await expect(page.locator(control)).to_have_count(0)
