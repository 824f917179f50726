"""The console in a real headless Chromium, against a real coordinator on 127.0.0.1."""

from __future__ import annotations

from typing import Any

from astraeus.shared.fake_gpu import gpu_uuid

from .cluster import A100, FABRIC, H100, RACK, SITE, Cluster, gpu, report
from .conftest import screenshot_path

NO_ROOM = "insufficient gpus: need 8, 0 free and usable"
CORDONED = "machine is cordoned: firmware update"
AT_RISK = "PCIe replays: 41/min, above 31/min for Gen5 x16"


def _labels(site: str, rack: str, fabric: str | None = None) -> dict[str, str]:
    labels = {SITE: site, RACK: rack}
    if fabric:
        labels[FABRIC] = fabric
    return labels


async def three_machines(cluster: Cluster) -> None:
    """gpu-01 (8 H100, ib-0), gpu-02 (8 H100, cordoned for a firmware update), gpu-03 (4 A100,
    one at risk) in site fra-1; gpu-04 (8 H100) in site ams-1, cordoned too."""
    await cluster.report(
        report("gpu-01", [gpu("gpu-01", i) for i in range(8)], _labels("fra-1", "r1", "ib-0"))
    )
    await cluster.report(
        report("gpu-02", [gpu("gpu-02", i) for i in range(8)], _labels("fra-1", "r1", "ib-0"))
    )
    signal = {"kind": "pcie_replay", "message": AT_RISK}
    risky = {"health": {"state": "at_risk", "signals": [signal]}}
    a100s = [gpu("gpu-03", i, A100, **(risky if i == 3 else {})) for i in range(4)]
    await cluster.report(report("gpu-03", a100s, _labels("fra-1", "r2")))
    await cluster.report(
        report("gpu-04", [gpu("gpu-04", i) for i in range(8)], _labels("ams-1", "r9"))
    )
    for name in ("gpu-02", "gpu-04"):
        cordon = {"reason": "firmware update"}
        await cluster.ok("POST", f"/api/v1/machines/{name}/cordon", body=cordon)


async def sign_in(page: Any, cluster: Cluster, token: str) -> None:
    await page.goto(cluster.url)
    await page.fill("#token", token)
    await page.click("#sign-in")
    await page.wait_for_selector("#runs")


async def open_new_run(page: Any) -> None:
    """New run, once it has read the machines' GPU models."""
    await page.click("text=New run")
    await page.wait_for_selector("#model[data-loaded]", state="attached")


async def test_a_waiting_run_shows_its_reasons_and_starts_when_a_machine_frees(
    cluster: Cluster, page: Any
) -> None:
    """Sign in, submit a run that must wait, read each machine's reason, uncordon one, see it
    start on that machine, with "Asked and got" naming where it went."""
    from playwright.async_api import expect

    await three_machines(cluster)
    blocker = {"name": "blocker", "command": ["sleep", "1d"]}
    blocker["requested_resources"] = {"gpu_requests": {"count": 8, "models": ["H100"]}}
    await cluster.ok("POST", "/api/v1/runs", cluster.member, blocker)
    await cluster.run_pass()
    assert (await cluster.ok("GET", "/api/v1/runs/blocker", cluster.member))["state"] == "Running"

    await sign_in(page, cluster, cluster.member)
    await open_new_run(page)
    await page.fill("#name", "finetune")
    await page.fill("#image", "nvcr.io/nvidia/pytorch:24.08-py3")
    await page.fill("#command", "python finetune.py --tag 'first try'")
    await page.fill("#gpus", "8")
    await page.select_option("#model", H100)
    await page.click("#more-options summary")
    await page.fill("#min-per-machine", "8")
    await page.fill("#cpu", "12")
    await page.fill("#memory", "120")
    await page.click("#submit")
    await page.wait_for_url("**#/runs/finetune")
    await cluster.run_pass()

    why = page.locator("#why")
    await expect(why.locator(".headline")).to_have_text("No machine fits: 4 of 4 machines ready")
    await expect(why.locator("#counts")).to_contain_text("4 machines considered, 4 up.")
    await expect(page.locator('#why-machines tr[data-machine="gpu-02"] td.reason')).to_have_text(
        CORDONED
    )
    await expect(page.locator('#why-machines tr[data-machine="gpu-01"] td.reason')).to_have_text(
        NO_ROOM
    )
    await expect(page.locator('#why-machines tr[data-machine="gpu-03"] td.reason')).to_have_text(
        f"no {H100} GPU"
    )
    await expect(why.locator("#closest")).to_have_text("gpu-01")
    await expect(why.locator("#advice")).to_contain_text(
        "falls short only on room (cores, memory, GPUs): the run starts when enough frees up."
    )
    await expect(page.locator("#asked-and-got")).to_contain_text("GPUs per machine at least8")
    await page.screenshot(path=screenshot_path("run-waiting"), full_page=True)

    api = await cluster.ok("GET", "/api/v1/tasks/finetune-0", cluster.member)
    shown = {
        node["name"]: await page.locator(
            f'#why-machines tr[data-machine="{node["name"]}"] td.reason'
        ).inner_text()
        for node in api["placement"]["nodes"]
    }
    assert shown == {node["name"]: "; ".join(node["reasons"]) for node in api["placement"]["nodes"]}

    await cluster.ok("POST", "/api/v1/machines/gpu-02/uncordon")
    await cluster.run_pass()
    await expect(page.locator(".readout .badge").first).to_have_text("Running")
    await expect(page.locator("#why")).to_have_count(0)
    await expect(page.locator("#landing")).to_have_text("one machine, gpu-02")
    task = page.locator('#tasks tr[data-task="finetune-0"]')
    await expect(task).to_contain_text("gpu-02")
    await expect(task.locator("td.gpus")).to_contain_text(gpu_uuid("gpu-02", 0))
    gpus = [gpu("gpu-02", i) for i in range(8)]
    machine = report("gpu-02", gpus, _labels("fra-1", "r1", "ib-0"))
    await cluster.report(machine, {"finetune-0": "Running"}, {"finetune-0": "epoch 1: loss 2.31\n"})
    await expect(task.locator(".badge")).to_have_text("Running")
    await expect(page.locator('#logs details[data-task="finetune-0"] pre')).to_have_text(
        "epoch 1: loss 2.31\n"
    )
    await expect(page.locator(".readout code")).to_have_text("python finetune.py --tag 'first try'")
    await page.screenshot(path=screenshot_path("run-started"), full_page=True)
    run = await cluster.ok("GET", "/api/v1/runs/finetune", cluster.member)
    assert run["command"] == ["python", "finetune.py", "--tag", "first try"]
    assert run["requested_resources"]["per_gpu"] == {
        "cpu_cores": 12,
        "memory_bytes": 120 * 1024**3,
    }


async def test_new_run_offers_the_machines_models_and_sites_and_shows_errors_by_their_fields(
    cluster: Cluster, page: Any
) -> None:
    """New run lists the reported GPU models and the machines by site; the API's 4xx `fields`
    appear beside the fields they concern; a dry run says where it would go or why it would
    wait, by reason with counts; ticked machines are sent as names."""
    from playwright.async_api import expect

    await three_machines(cluster)
    await sign_in(page, cluster, cluster.member)
    await open_new_run(page)
    options = await page.locator("#model option").all_inner_texts()
    # Free means usable by a run now: the cordoned gpu-02's and gpu-04's H100s are not.
    assert options == ["Any model", f"{A100} (4 of 4 free)", f"{H100} (8 of 24 free)"]
    assert await page.locator("#site option").all_inner_texts() == ["Automatic", "ams-1", "fra-1"]
    await page.click("#choose-machines summary")
    legends = await page.locator("#choose-machines legend").all_inner_texts()
    assert legends == ["Site ams-1", "Site fra-1"]
    fra = page.locator('#choose-machines fieldset[data-site="fra-1"] label')
    assert await fra.all_inner_texts() == [
        f"gpu-01 8 of 8 GPUs free ({H100})",
        f"gpu-02 0 of 8 GPUs free ({H100}) — cordoned",
        f"gpu-03 4 of 4 GPUs free ({A100})",
    ]

    await page.fill("#name", "Bad_Name")
    await page.fill("#command", "python train.py")
    await page.fill("#gpus", "8")
    await page.click("#more-options summary")
    await page.fill("#min-per-machine", "9")
    await page.click("#submit")
    name_error = page.locator('.field[data-field="name"] .field-error')
    await expect(name_error).to_have_text(
        "Use lowercase letters, digits and '-', up to 63 characters, starting and ending with a "
        "letter or digit."
    )
    per_machine = page.locator(
        '.field[data-field="requested_resources.gpu_requests.min_per_machine"] .field-error'
    )
    await expect(per_machine).to_have_text(
        "9 GPUs on one machine is more than the 8 the run asks for: give at most 8."
    )
    await page.screenshot(path=screenshot_path("new-run-errors"), full_page=True)

    await page.fill("#name", "picked")
    await page.fill("#min-per-machine", "")
    await page.fill("#priority", "5")
    await page.click("#submit")
    await expect(page.locator('.field[data-field="priority"] .field-error')).to_have_text(
        "Workspace vision allows a priority of at most 0."
    )
    await expect(name_error).to_be_hidden()
    await expect(per_machine).to_be_hidden()

    await page.fill("#priority", "")
    await page.click("#dry-run")
    await expect(page.locator("#dry-run-result")).to_have_text(
        "It would start now: 1 machine × 8 GPUs on gpu-01."
    )
    await page.check('#choose-machines input[value="gpu-02"]')
    await page.click("#dry-run")
    await expect(page.locator("#dry-run-result .advice")).to_have_text(
        "It would wait: No machine fits: 4 of 4 machines ready"
    )
    dry = page.locator("#dry-run-reasons li")
    assert await dry.all_inner_texts() == [
        f"2 machines: {CORDONED} (gpu-02, gpu-04)",
        "2 machines: machine is not among the run's names (gpu-01, gpu-03)",
    ]
    await expect(page.locator("#dry-run-closest")).to_have_count(0)
    await page.check('#choose-machines input[value="gpu-01"]')
    await page.click("#submit")
    await page.wait_for_url("**#/runs/picked")
    run = await cluster.ok("GET", "/api/v1/runs/picked", cluster.member)
    assert run["requested_resources"]["node_selection"] == {
        "mode": "Any",
        "names": ["gpu-01", "gpu-02"],
        "match_labels": {},
        "count": None,
    }


async def test_a_site_known_only_from_the_network_can_be_chosen(
    cluster: Cluster, page: Any
) -> None:
    """New run offers the site of machines with no site label, the network of the address they
    advertise, and sends it as those machines' names, so the run lands there."""
    await cluster.report(
        report("gpu-01", [gpu("gpu-01", i) for i in range(8)], _labels("fra-1", "r1"))
    )
    for name in ("lab-1", "lab-2"):
        gpus = [gpu(name, i) for i in range(8)]
        await cluster.report(report(name, gpus, {}, advertise_address="127.0.0.1"))
    await sign_in(page, cluster, cluster.member)
    await open_new_run(page)
    assert await page.locator("#site option").all_inner_texts() == [
        "Automatic",
        "127.0.0.0/24 (from the network)",
        "fra-1",
    ]
    await page.fill("#name", "nearby")
    await page.fill("#command", "python train.py")
    await page.fill("#gpus", "8")
    await page.select_option("#site", "127.0.0.0/24")
    await page.click("#submit")
    await page.wait_for_url("**#/runs/nearby")
    run = await cluster.ok("GET", "/api/v1/runs/nearby", cluster.member)
    assert run["requested_resources"]["node_selection"] == {
        "mode": "Any",
        "names": ["lab-1", "lab-2"],
        "match_labels": {},
        "count": None,
    }
    await cluster.run_pass()
    run = await cluster.ok("GET", "/api/v1/runs/nearby", cluster.member)
    assert run["landing"]["machines"] == ["lab-1"]


async def test_sign_in_runs_list_and_cancel(cluster: Cluster, page: Any) -> None:
    """An admin's unknown workspace and a wrong token are refused in words for people, each
    beside its field; the runs list shows state, shape and the headline reason; a run is
    cancelled from its page; a revoked token sends the user back to sign in, with no nav."""
    from playwright.async_api import expect

    await three_machines(cluster)
    for machine in ("gpu-02", "gpu-04"):
        await cluster.ok("POST", f"/api/v1/machines/{machine}/uncordon")
    for name, model in (("placed", "H100"), ("nowhere", "B200")):
        spec = {"name": name, "command": ["sleep", "1d"]}
        spec["requested_resources"] = {"gpu_requests": {"count": 8, "models": [model]}}
        await cluster.ok("POST", "/api/v1/runs", cluster.member, spec)
    await cluster.run_pass()

    await page.goto(cluster.url)
    await page.fill("#token", cluster.admin)
    await page.fill("#workspace", "nope")
    await page.click("#sign-in")
    await expect(page.locator('.field[data-field="workspace"] .field-error')).to_have_text(
        "There is no workspace named nope. Check the name, or ask an admin which workspaces "
        "there are."
    )
    await page.fill("#token", "not-a-token")
    await page.fill("#workspace", "")
    await page.click("#sign-in")
    await expect(page.locator('.field[data-field="token"] .field-error')).to_have_text(
        "This token is not known here. Ask an admin for a workspace token."
    )
    await expect(page.locator("nav")).to_be_hidden()
    await page.fill("#token", cluster.member)
    await page.click("#sign-in")
    placed = page.locator('#runs tr[data-run="placed"] td')
    await expect(placed.nth(1)).to_have_text("Running")
    await expect(placed.nth(2)).to_have_text("1 machine × 8 GPUs on gpu-01")
    nowhere = page.locator('#runs tr[data-run="nowhere"] td')
    await expect(nowhere.nth(1)).to_have_text("Pending")
    await expect(nowhere.nth(3)).to_have_text("no B200 GPU")
    await page.screenshot(path=screenshot_path("runs"), full_page=True)

    await page.click("text=nowhere")
    await expect(page.locator("#advice")).to_have_text(
        "Every machine gives the same reason, no B200 GPU: that reason is the problem. No machine "
        "in the workspace's pools has that model. Pick a model from the console's GPU model "
        "list, or ask for another pool."
    )
    page.on("dialog", lambda dialog: dialog.accept())
    await page.click("#cancel")
    await expect(page.locator(".readout .badge").first).to_have_text("Cancelled")
    run = await cluster.ok("GET", "/api/v1/runs/nowhere", cluster.member)
    assert run["state"] == "Cancelled"

    await cluster.ok("DELETE", f"/api/v1/tokens/{cluster.member_id}")
    await page.click("nav >> text=Machines")
    await expect(page.locator('.field[data-field="token"] .field-error')).to_have_text(
        "This token is no longer accepted: it may have been revoked. Sign in again with a "
        "current token."
    )
    await expect(page.locator("nav")).to_be_hidden()
    assert await page.evaluate("sessionStorage.getItem('astraeus.token')") is None


HOW_TO_READ = {
    "closest": (
        "No machine fits: 3 of 3 machines ready",
        "NoMachineFits",
        {"checked_nodes": 3, "ready_nodes": 3, "down_nodes": 0, "closest": "gpu-02", "nodes": []},
        [],
        "gpu-02 falls short only on room (cores, memory, GPUs): the run starts when enough frees "
        "up. Nothing to do, unless it should start sooner: see Priorities.",
    ),
    "no-closest": (
        "No machine fits: 2 of 2 machines ready",
        "NoMachineFits",
        {
            "checked_nodes": 2,
            "ready_nodes": 2,
            "down_nodes": 0,
            "closest": None,
            "nodes": [
                {"name": "a", "state": "Up", "reasons": ["no H100 GPU"]},
                {"name": "b", "state": "Up", "reasons": ["machine is cordoned: firmware update"]},
            ],
        },
        [
            {"filter": "gpus", "code": "NoGPUModel", "room": False, "machines": ["a"]},
            {"filter": "accepting", "code": "Cordoned", "room": False, "machines": ["b"]},
        ],
        "No machine could ever take it as asked. Read each machine's reason and change the run "
        "(another GPU model, fewer GPUs per machine, a looser rule) or the machines.",
    ),
    "same-reason": (
        "machine lacks label pool=h100",
        "SameReason",
        {
            "checked_nodes": 2,
            "ready_nodes": 2,
            "down_nodes": 0,
            "closest": None,
            "nodes": [
                {"name": "a", "state": "Up", "reasons": ["machine lacks label pool=h100"]},
                {"name": "b", "state": "Up", "reasons": ["machine lacks label pool=h100"]},
            ],
        },
        [{"filter": "selection", "code": "NotInPool", "room": False, "machines": ["a", "b"]}],
        "Every machine gives the same reason, machine lacks label pool=h100: that reason is the "
        "problem. The run or the workspace selects a pool those machines are not in. Remove the "
        "selector, or move the machines to the pool.",
    ),
    "queue": (
        "Queued behind finetune",
        "QueuedBehind",
        None,
        None,
        "The run fits, and the queue holds it back: it starts when its turn comes.",
    ),
    "all-down": (
        "No machine fits: 0 of 2 machines ready",
        "NoMachineFits",
        {"checked_nodes": 2, "ready_nodes": 0, "down_nodes": 2, "closest": None, "nodes": []},
        [],
        "No machine is up: the run starts once machines report again.",
    ),
    "not-evaluated": (
        None,
        "NotEvaluated",
        None,
        None,
        "The scheduler has not looked at this run yet; this page updates by itself.",
    ),
}
"""Cases of the guide's "How to read it": a task's `reason`, `reason_kind`, `placement` and
`rejections` as the API gives them, and the advice the console writes."""


async def test_how_to_read_it(cluster: Cluster, page: Any) -> None:
    """The advice under "Why it is not running yet" follows the guide's "How to read it", case
    by case (ids are the keys of the table)."""
    await page.goto(cluster.url)
    cases = {
        key: {"reason": reason, "kind": kind, "placement": placement, "rejections": rejections}
        for key, (reason, kind, placement, rejections, _) in HOW_TO_READ.items()
    }
    read = await page.evaluate(
        """async (cases) => {
            const why = await import("/console/why.js");
            return Object.fromEntries(
                Object.entries(cases).map(([key, task]) => [key, why.reading(task)]),
            );
        }""",
        cases,
    )
    assert read == {key: case[-1] for key, case in HOW_TO_READ.items()}


def ib_port(fabric: str) -> dict[str, Any]:
    """An active 400 Gb/s InfiniBand port on `fabric`."""
    return {
        "device": "mlx5_0",
        "port": 1,
        "state": "ACTIVE",
        "physical_state": "LinkUp",
        "link_layer": "InfiniBand",
        "rate_gbps": 400,
        "fabric": fabric,
    }


async def test_network_and_placement_rules_become_the_ask_and_asked_and_got(
    cluster: Cluster, page: Any
) -> None:
    """Every Network and placement field lands in the run's ask as the guide names it, and
    "Asked and got" lists the rules and where the run went: one InfiniBand fabric, ib-0."""
    from playwright.async_api import expect

    for name, rack in (("ib-a", "r1"), ("ib-b", "r2")):
        gpus = [gpu(name, i) for i in range(8)]
        labels = _labels("fra-1", rack, "ib-0")
        await cluster.report(report(name, gpus, labels, rdma_ports=[ib_port("ib-0")]))
    await sign_in(page, cluster, cluster.member)
    await open_new_run(page)
    await page.fill("#name", "pretrain")
    await page.fill("#command", "python pretrain.py")
    await page.fill("#gpus", "16")
    await page.click("#more-options summary")
    await page.fill("#min-per-machine", "8")
    await page.fill("#min-memory", "80")
    await page.click("#network-and-placement summary")
    await page.select_option("#interconnect", "infiniband")
    await page.fill("#min-gbps", "400")
    await page.select_option("#keep-within", "fabric")
    await page.select_option("#spread", "node")
    await page.fill("#min-nodes", "2")
    await page.fill("#max-nodes", "2")
    await page.fill("#patience", "30")
    await page.check("#healthy-only")
    await page.select_option("#site", "fra-1")
    await page.click("#submit")
    await page.wait_for_url("**#/runs/pretrain")
    run = await cluster.ok("GET", "/api/v1/runs/pretrain", cluster.member)
    assert run["requested_resources"] == {
        "gpu_requests": {
            "count": 16,
            "models": [],
            "min_memory_gb": 80,
            "vendor": None,
            "healthy_only": True,
            "min_per_machine": 8,
            "policy": None,
            "ids": [],
        },
        "per_gpu": None,
        "cpu_cores": None,
        "memory_bytes": None,
        "machines": None,
        "network": {"interconnect": "infiniband", "min_gbps": 400},
        "topology": {
            "min_nodes": 2,
            "max_nodes": 2,
            "keep_within": "fabric",
            "spread": "node",
            "patience_seconds": 1800,
        },
        "node_selection": {
            "mode": "Exact",
            "names": [],
            "match_labels": {SITE: "fra-1"},
            "count": None,
        },
        "drives": [],
        "array": None,
        "capabilities": [],
    }

    await cluster.run_pass()
    await expect(page.locator("#landing")).to_have_text("one InfiniBand fabric, ib-0")
    asked = page.locator("#asked-and-got dl").first
    pairs = dict(
        zip(
            await asked.locator("dt").all_inner_texts(),
            await asked.locator("dd").all_inner_texts(),
            strict=True,
        )
    )
    assert pairs == {
        "GPUs": "16",
        "GPU memory at least": "80 GB",
        "GPUs per machine at least": "8",
        "Only healthy GPUs": "yes",
        "Network between workers": "InfiniBand",
        "RDMA port speed at least": "400 Gb/s",
        "Never leave": "one fabric",
        "One worker per": "machine",
        "Machines between": "2 and 2",
        "Wait for a better network": "30 min",
        "Site": "fra-1",
    }
    await page.screenshot(path=screenshot_path("asked-and-got"), full_page=True)


async def test_an_array_run_explains_its_waiting_task(cluster: Cluster, page: Any) -> None:
    """A running array whose second task waits shows that task's reasons, machine by machine."""
    from playwright.async_api import expect

    await three_machines(cluster)
    spec = {"name": "sweep", "command": ["python", "sweep.py"]}
    spec["requested_resources"] = {"gpu_requests": {"count": 8}, "array": {"size": 2}}
    await cluster.ok("POST", "/api/v1/runs", cluster.member, spec)
    await cluster.run_pass()
    run = await cluster.ok("GET", "/api/v1/runs/sweep", cluster.member)
    assert [task["state"] for task in run["tasks"]] == ["Assigned", "Pending"]

    await sign_in(page, cluster, cluster.member)
    await page.goto(f"{cluster.url}console/#/runs/sweep")
    why = page.locator("#why")
    await expect(why).to_contain_text("sweep-1 waits; the run's other tasks are placed.")
    task = await cluster.ok("GET", "/api/v1/tasks/sweep-1", cluster.member)
    await expect(why.locator(".headline")).to_have_text(task["reason"])
    for node in task["placement"]["nodes"]:
        row = page.locator(f'#why-machines tr[data-machine="{node["name"]}"] td.reason')
        await expect(row).to_have_text("; ".join(node["reasons"]))


async def test_a_waiting_run_is_read_grouped_and_each_machine_once_per_evaluation(
    cluster: Cluster, page: Any
) -> None:
    """A waiting run's page re-reads the run grouped by reason at every refresh, and the task's
    per-machine explanation only once while the scheduler has not looked at it again."""
    from playwright.async_api import expect

    await three_machines(cluster)
    spec = {"name": "big", "command": ["x"], "requested_resources": {"gpu_requests": {"count": 8}}}
    spec["requested_resources"]["gpu_requests"]["min_per_machine"] = 8
    await cluster.ok("POST", "/api/v1/runs", cluster.member, spec)
    await cluster.run_pass()
    await cluster.ok("POST", "/api/v1/runs", cluster.member, {**spec, "name": "later"})
    await cluster.run_pass()
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    await sign_in(page, cluster, cluster.member)
    await page.goto(f"{cluster.url}console/#/runs/later")
    await expect(page.locator("#why-groups li")).to_have_count(3)
    await page.wait_for_timeout(4500)  # two refreshes at least (every 2 s)
    runs = [url for url in asked if "/api/v1/runs/later" in url]
    tasks = [url for url in asked if "/api/v1/tasks/later-0" in url]
    assert len(runs) >= 3
    assert all("explain=grouped" in url for url in runs)
    assert len(tasks) == 1
    assert "explain" not in tasks[0]
    await expect(page.locator('#why-machines tr[data-machine="gpu-01"] td.reason')).to_have_text(
        NO_ROOM
    )


async def _runs_behind_links(cluster: Cluster) -> tuple[str, str]:
    """Workspaces `vision` and `nlp` each hold a run named `secret` (told apart by their
    commands), `nlp` alone one named `lonely`, and `empty` none; the answer is this cluster's
    name and a member token of `nlp`."""
    for workspace in ("nlp", "empty"):
        await cluster.ok("PUT", f"/api/v1/workspaces/{workspace}", body={"pools": []})
    made = await cluster.ok("POST", "/api/v1/tokens", body={"role": "member", "workspace": "nlp"})
    nlp = str(made["token"])
    for token, name, command in (
        (nlp, "secret", ["echo", "nlp"]),
        (cluster.member, "secret", ["echo", "vision"]),
        (nlp, "lonely", ["echo", "lonely"]),
    ):
        await cluster.ok("POST", "/api/v1/runs", token, {"name": name, "command": command})
    here = await cluster.ok("GET", "/api/v1/cluster", cluster.member)
    return str(here["name"]), nlp


async def _open_link(
    page: Any, cluster: Cluster, link: str, token: str, workspace: str = ""
) -> None:
    """Open `<console>/jobs/<cluster>/<run>` signed out (a fresh tab's state), then sign in."""
    await page.evaluate("() => sessionStorage.clear()")
    await page.goto(f"{cluster.url}console/jobs/{link}")
    await page.fill("#token", token)
    if workspace:
        await page.fill("#workspace", workspace)
    await page.click("#sign-in")


async def test_a_link_in_the_guides_form_opens_the_run_after_sign_in(
    cluster: Cluster, page: Any
) -> None:
    """The link `astra astraeus run` prints, `<console>/jobs/<cluster>/<run>`, opened signed
    out: sign in, and the run of the member's workspace opens (at `#/runs/<run>`)."""
    from playwright.async_api import expect

    here, nlp = await _runs_behind_links(cluster)
    await page.goto(cluster.url)
    for token, command in ((nlp, "echo nlp"), (cluster.member, "echo vision")):
        await _open_link(page, cluster, f"{here}/secret", token)
        await page.wait_for_url("**/console/#/runs/secret")
        await expect(page.locator("#run")).to_contain_text(command)


async def test_a_link_for_another_cluster_says_which_cluster_this_is(
    cluster: Cluster, page: Any
) -> None:
    """A link naming another cluster is Not found, saying which cluster this console serves
    and which the link is for (names escaped in the link are shown unescaped)."""
    from playwright.async_api import expect

    here, _ = await _runs_behind_links(cluster)
    await page.goto(cluster.url)
    await _open_link(page, cluster, "gpu%20west/secret", cluster.member)
    await expect(page.locator("#main h1")).to_have_text("Not found")
    await expect(page.locator("#main p")).to_contain_text(
        f"This console serves cluster {here}; the link is for cluster gpu west."
    )
    await expect(page.locator("#run")).to_have_count(0)


async def test_a_member_learns_nothing_of_another_workspaces_run(
    cluster: Cluster, page: Any
) -> None:
    """A member of `vision` opening the link to `lonely` (a run of `nlp` only) sees the same
    words as for a run that exists nowhere; no run page opens."""
    from playwright.async_api import expect

    here, _ = await _runs_behind_links(cluster)
    await page.goto(cluster.url)
    seen = []
    for name in ("lonely", "nowhere"):
        await _open_link(page, cluster, f"{here}/{name}", cluster.member)
        await expect(page.locator("#main h1")).to_have_text("Not found")
        assert page.url.endswith(f"/console/#/jobs/{here}/{name}")
        await expect(page.locator("#run")).to_have_count(0)
        seen.append((await page.locator("#main").inner_text()).replace(name, "NAME"))
    assert seen[0] == seen[1]
    assert "There is no run NAME that you may see." in seen[0]


async def test_an_admins_link_finds_the_runs_workspace(cluster: Cluster, page: Any) -> None:
    """An admin: the current workspace first (vision's `secret`); a run in exactly one
    workspace opens there and the admin now acts in it (`lonely`, nlp); a run in several, none
    current, offers them to choose from (`secret` from `empty`: nlp and vision), and choosing
    opens that one; a run nowhere is Not found."""
    from playwright.async_api import expect

    here, _ = await _runs_behind_links(cluster)
    await page.goto(cluster.url)
    await _open_link(page, cluster, f"{here}/secret", cluster.admin, "vision")
    await page.wait_for_url("**/console/#/runs/secret")
    await expect(page.locator("#run")).to_contain_text("echo vision")
    await expect(page.locator("#who")).to_have_text("admin, workspace vision")

    for workspace in ("", "vision"):
        await _open_link(page, cluster, f"{here}/lonely", cluster.admin, workspace)
        await page.wait_for_url("**/console/#/runs/lonely")
        await expect(page.locator("#run")).to_contain_text("echo lonely")
        await expect(page.locator("#who")).to_have_text("admin, workspace nlp")

    await _open_link(page, cluster, f"{here}/secret", cluster.admin, "empty")
    choices = page.locator("#run-workspaces a")
    await expect(choices).to_have_text(["nlp", "vision"])
    await page.screenshot(path=screenshot_path("run-link-choose-workspace"))
    await choices.filter(has_text="nlp").click()
    await page.wait_for_url("**/console/#/runs/secret")
    await expect(page.locator("#run")).to_contain_text("echo nlp")
    await expect(page.locator("#who")).to_have_text("admin, workspace nlp")

    await _open_link(page, cluster, f"{here}/nowhere", cluster.admin, "vision")
    await expect(page.locator("#main h1")).to_have_text("Not found")
    await expect(page.locator("#main")).to_contain_text("There is no run nowhere that you may see.")


async def test_usage_shows_each_workspace_against_its_fair_share(
    cluster: Cluster, page: Any
) -> None:
    """The Usage page: the cluster's GPUs in use and each workspace's row, with its weight and
    its turn under fair share for an admin; a member sees its own workspace only (the API sends
    no other), with no fair share to compare and no other workspace's name on the page."""
    from playwright.async_api import expect

    await three_machines(cluster)
    await cluster.ok("PUT", "/api/v1/workspaces/speech", body={"fair_share_weight": 2})
    spec = {"name": "placed", "command": ["sleep", "1d"]}
    spec["requested_resources"] = {"gpu_requests": {"count": 8}}
    await cluster.ok("POST", "/api/v1/runs", cluster.member, spec)
    await cluster.run_pass()

    await page.goto(cluster.url)
    await page.fill("#token", cluster.admin)
    await page.fill("#workspace", "vision")
    await page.click("#sign-in")
    await page.click('nav a[data-nav="usage"]')
    await expect(page.locator(".usage-summary")).to_contain_text("8 GPUs of 28 GPUs in use now")
    vision = page.locator('#usage tr[data-workspace="vision"] td')
    await expect(vision.nth(3)).to_have_text("8 GPUs (29 %)")
    await expect(vision.nth(4)).to_have_text("1")
    speech = page.locator('#usage tr[data-workspace="speech"] td')
    await expect(speech.nth(3)).to_have_text("0 GPUs (0 %)")
    await expect(speech.nth(4)).to_have_text("2")
    fair = page.locator('#usage tr[data-workspace="speech"] .usage-fair')
    await expect(fair).to_have_attribute("style", "left: 66.7%;")  # weight 2 of 3
    policies = page.locator("#policies li strong")
    await expect(policies).to_have_text(
        [
            "Fair share.",
            "Holding for big runs.",
            "Backfill.",
            "Guarantees.",
            "Preemption.",
            "Requeue.",
        ]
    )
    await page.screenshot(path=screenshot_path("usage"), full_page=True)

    await page.click("#sign-out")
    await sign_in(page, cluster, cluster.member)
    await page.click('nav a[data-nav="usage"]')
    await expect(page.locator('#usage tr[data-workspace="vision"]')).to_have_count(1)
    await expect(page.locator("#usage tbody tr")).to_have_count(1)
    await expect(page.locator(".usage-fair")).to_have_count(0)
    assert "speech" not in await page.locator("#main").inner_text()
