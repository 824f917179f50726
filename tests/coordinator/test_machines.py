"""Machines as admins manage them (labels, reservations), and what /metrics says about them."""

from __future__ import annotations

from .conftest import Cluster


async def test_admin_labels_win_and_select_pools(fake_cluster: Cluster) -> None:
    """Labels an admin sets win over the agent's and decide which workspace sees the machine."""
    c = fake_cluster
    member = await c.workspace("vision", pools=["h100"])
    await c.report("gpu-01", labels={"pool": "a100", "topology.astraeus.io/rack": "r1"})
    status, _ = await c.call("GET", "/api/v1/machines/gpu-01", member)
    assert status == 404
    status, machine = await c.call(
        "PUT",
        "/api/v1/machines/gpu-01/labels",
        body={"labels": {"pool": "h100", "topology.astraeus.io/site": "fra-1"}},
    )
    assert status == 200
    assert machine["labels"] == {
        "pool": "h100",
        "topology.astraeus.io/rack": "r1",
        "topology.astraeus.io/site": "fra-1",
    }
    assert machine["site"] == "fra-1"
    status, seen = await c.call("GET", "/api/v1/machines/gpu-01", member)
    assert (status, seen["labels"]["pool"]) == (200, "h100")


async def test_reservations_are_added_listed_and_removed(fake_cluster: Cluster) -> None:
    """An admin reserves a machine for a workspace between two times, then drops it."""
    c = fake_cluster
    await c.workspace("vision")
    await c.report("gpu-01")
    body = {
        "workspace": "vision",
        "starts_at": "2026-10-01T10:00:00+00:00",
        "ends_at": "2026-10-01T12:00:00+00:00",
    }
    status, stored = await c.call("POST", "/api/v1/machines/gpu-01/reservations", body=body)
    assert status == 201
    status, listed = await c.call("GET", "/api/v1/machines/gpu-01/reservations")
    assert [r["id"] for r in listed["reservations"]] == [stored["id"]]
    status, _ = await c.call("DELETE", f"/api/v1/machines/gpu-01/reservations/{stored['id']}")
    assert status == 204
    status, listed = await c.call("GET", "/api/v1/machines/gpu-01/reservations")
    assert listed["reservations"] == []


async def test_reservation_needs_a_window_for_a_workspace(fake_cluster: Cluster) -> None:
    """A workspace reservation without times is refused, naming the problem."""
    c = fake_cluster
    await c.report("gpu-01")
    status, data = await c.call(
        "POST", "/api/v1/machines/gpu-01/reservations", body={"workspace": "vision"}
    )
    assert status == 400
    assert data["fields"] == [
        {"field": "", "problem": "a reservation for a workspace needs starts_at and ends_at"}
    ]


async def test_ended_reservations_expire(fake_cluster: Cluster) -> None:
    """A pass drops reservations whose end has passed."""
    c = fake_cluster
    await c.report("gpu-01")
    body = {"labels": {"team": "llm"}, "ends_at": "2026-10-01T09:30:00+00:00"}
    status, _ = await c.call("POST", "/api/v1/machines/gpu-01/reservations", body=body)
    assert status == 201
    c.clock.advance(3600)
    await c.report("gpu-01")
    await c.run_pass()
    _, listed = await c.call("GET", "/api/v1/machines/gpu-01/reservations")
    assert listed["reservations"] == []


async def test_metrics_count_runs_machines_and_gpus(fake_cluster: Cluster) -> None:
    """`/metrics` counts runs by state, pending reasons, machines Up and Down, GPUs by state."""
    c = fake_cluster
    await c.workspace("vision")
    await c.report("gpu-01")
    c.agent_token("gpu-02")  # known, never reported: Down
    await c.submit("vision", "a", gpus=3)
    await c.submit("vision", "b", gpus=8)
    await c.run_pass()
    response = await c.client.get("/metrics", headers=c.auth())
    assert response.status == 200
    assert response.content_type == "text/plain"
    lines = set((await response.text()).splitlines())
    for expected in (
        'astraeus_runs{state="Pending"} 1',
        'astraeus_runs{state="Running"} 1',
        'astraeus_pending_runs{reason="NoMachineFits"} 1',
        'astraeus_machines{state="Up"} 1',
        'astraeus_machines{state="Down"} 1',
        'astraeus_gpus{model="NVIDIA H100 80GB HBM3",state="used"} 3',
        'astraeus_gpus{model="NVIDIA H100 80GB HBM3",state="free"} 5',
        "astraeus_scheduler_pass_seconds_count 1",
        "astraeus_placement_latency_seconds_count 1",
    ):
        assert expected in lines


async def test_gpus_on_a_cordoned_machine_are_idle_not_free_in_the_metrics(
    fake_cluster: Cluster,
) -> None:
    """Free means usable by a run now, in `/metrics` as in the machine views and the console:
    a cordoned machine's unheld GPUs are `idle`, not `free`."""
    c = fake_cluster
    await c.report("gpu-01")
    await c.report("gpu-02")
    await c.call("POST", "/api/v1/machines/gpu-02/cordon", body={"reason": "firmware update"})
    response = await c.client.get("/metrics", headers=c.auth())
    lines = set((await response.text()).splitlines())
    assert 'astraeus_gpus{model="NVIDIA H100 80GB HBM3",state="free"} 8' in lines
    assert 'astraeus_gpus{model="NVIDIA H100 80GB HBM3",state="idle"} 8' in lines


async def test_pending_runs_are_counted_by_their_stored_kind_not_their_words(
    fake_cluster: Cluster,
) -> None:
    """`astraeus_pending_runs` counts the kind stored with each reason: a reason whose words
    read like a queue reason is still counted by its kind, and an unexplained run as
    `NotEvaluated`."""
    c = fake_cluster
    await c.workspace("vision")
    await c.report("gpu-01", gpus=4)
    await c.submit("vision", "a", gpus=8)
    await c.run_pass()
    with c.store.database.write() as conn:
        conn.execute("UPDATE runs SET reason = 'Queued behind b' WHERE name = 'a'")
    await c.submit("vision", "b", gpus=8)
    response = await c.client.get("/metrics", headers=c.auth())
    lines = [line for line in (await response.text()).splitlines() if "pending_runs{" in line]
    assert lines == [
        'astraeus_pending_runs{reason="NoMachineFits"} 1',
        'astraeus_pending_runs{reason="NotEvaluated"} 1',
    ]


async def test_ethernet_speed_is_the_fastest_ethernet_interface_up(fake_cluster: Cluster) -> None:
    """The machines view's ethernet_mbps: the fastest Ethernet interface that is up; IPoIB and
    interfaces that are down do not count."""
    c = fake_cluster
    interfaces = [
        {"name": "eth0", "kind": "ethernet", "state": "up", "speed_mbps": 25000},
        {"name": "eth1", "kind": "ethernet", "state": "down", "speed_mbps": 100000},
        {"name": "ib0", "kind": "infiniband", "state": "up", "speed_mbps": 400000},
        {"name": "docker0", "kind": "ethernet", "state": "up"},
    ]
    await c.report("gpu-01", network_interfaces=interfaces)
    await c.report("gpu-02")
    status, listed = await c.call("GET", "/api/v1/machines")
    assert status == 200
    assert {m["name"]: m["ethernet_mbps"] for m in listed["machines"]} == {
        "gpu-01": 25000,
        "gpu-02": None,
    }


async def test_free_means_usable_by_a_run_now(fake_cluster: Cluster) -> None:
    """`gpus_free` counts what a run could be given now: a faulted GPU is neither free nor idle,
    but its machine's other GPUs are free (the engine never gives the faulted one only:
    tests/placement). Cordoned or under memory or disk pressure, the machine has no free GPU,
    its idle ones counted in `gpus_idle` (and per model in `idle`); PIDPressure does not stop
    placement, so it changes nothing here."""
    c = fake_cluster
    await c.workspace("vision")
    await c.report("gpu-01", faulted=(3,))
    status, machine = await c.call("GET", "/api/v1/machines/gpu-01")
    assert status == 200
    assert (machine["state"], machine["gpus_free"], machine["gpus_idle"]) == ("Up", 7, 7)
    await c.report("gpu-02")
    await c.call("POST", "/api/v1/machines/gpu-02/cordon", body={"reason": "firmware update"})
    _, machine = await c.call("GET", "/api/v1/machines/gpu-02")
    assert (machine["gpus_free"], machine["gpus_idle"]) == (0, 8)
    assert [(m["free"], m["idle"]) for m in machine["gpu_models"]] == [(0, 8)]
    await c.call("POST", "/api/v1/machines/gpu-02/uncordon")
    await c.report("gpu-02", conditions=["MemoryPressure"])
    _, machine = await c.call("GET", "/api/v1/machines/gpu-02")
    assert (machine["gpus_free"], machine["gpus_idle"]) == (0, 8)
    await c.report("gpu-02", conditions=["PIDPressure"])  # the scheduler still places here
    _, machine = await c.call("GET", "/api/v1/machines/gpu-02")
    assert (machine["gpus_free"], machine["gpus_idle"]) == (8, 8)
