"""The gang search over classes of alike machines chooses what judging every machine chooses.

`gang.reference_search` is the search machine by machine (the one before classes); the class
search must give the same `Choice` (rung, shape, machines, group) for the current and the idle
cluster, after any placements taken in a pass, and across sessions of one live state whose
machines change between them (the classes kept between evaluations are moved, not rebuilt)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from astraeus.coordinator.placement import Placement, PlacementSession, gang, ladder, survivors
from astraeus.coordinator.placement.cache.live import LiveState
from astraeus.coordinator.placement.evaluation import RunEvaluation
from astraeus.coordinator.placement.model import ClusterSnapshot, MachineSnapshot, Reservation
from astraeus.coordinator.placement.needs import Needs
from astraeus.coordinator.testing.fake_cluster import gpus, machine, rdma_port, run, snapshot

NOW = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
RUN = ("vision", "gang")


@st.composite
def alike_machine(draw: st.DrawFn, index: int) -> MachineSnapshot:
    """Machines from a few templates, so that many are alike, tie, and fall in few classes;
    now and then one with a score or a verdict of its own."""
    name = f"m{index:03d}"
    count = draw(st.sampled_from([8, 8, 8, 4]))
    risky = draw(st.sampled_from([[], [], [], [], [0], [5]]))
    domain = draw(st.sampled_from([None, None, "nvl-0", "nvl-1"]))
    used = draw(st.sampled_from([[], [], [], [1], [1, 2], [0, 1, 2, 3], list(range(count))]))
    fabric = draw(st.sampled_from([None, "ib-0", "ib-0", "ib-1"]))
    odd = draw(st.sampled_from([None] * 12 + ["pressure", "port", "label", "cordon", "here"]))
    return machine(
        name,
        gpu_list=gpus(name, count, at_risk=[r for r in risky if r < count], nvlink_domain=domain),
        used_gpus=used,
        cpu_cores=draw(st.sampled_from([64, 64, 128])),
        used_cores=draw(st.sampled_from([4 * len(used), 4 * len(used), 0.5 + 4 * len(used)])),
        rack=draw(st.sampled_from(["r0", "r0", "r1", "r2", None])),
        fabric=fabric,
        site=draw(st.sampled_from(["s1", "s1", "s1", "s2"])),
        ports=[rdma_port(at_risk=odd == "port")] if fabric or odd == "port" else [],
        cpu_pressure=odd == "pressure",
        reservations=[Reservation(labels={"team": "a"})] if odd == "label" else [],
        cordon="maintenance" if odd == "cordon" else None,
        workers=[RUN] if odd == "here" else [],
    )


@st.composite
def alike_clusters(draw: st.DrawFn) -> ClusterSnapshot:
    size = draw(st.integers(2, 40))
    return snapshot(*(draw(alike_machine(index)) for index in range(size)))


@st.composite
def gang_asks(draw: st.DrawFn) -> dict[str, Any]:
    """Gangs of GPUs, or of CPU workers (whose cores may be fractional), under the rules that
    change how groups are made or judged."""
    if draw(st.integers(0, 4)) == 0:
        ask: dict[str, Any] = {
            "machines": draw(st.sampled_from([2, 3, 4])),
            "cpu_cores": draw(st.sampled_from([1, 2.5, 8])),
        }
    else:
        count = draw(st.sampled_from([8, 16, 16, 24, 32]))
        ask = {
            "gpu_requests": {"count": count, "healthy_only": draw(st.booleans())},
            "per_gpu": {"cpu_cores": draw(st.sampled_from([0, 2, 4]))},
        }
        if draw(st.booleans()):
            ask["node_selection"] = {"mode": "Any"}
            ask["machines"] = draw(st.sampled_from([d for d in (2, 4, 8) if count % d == 0]))
    rule = draw(
        st.sampled_from([None, None, "keep_rack", "keep_fabric", "spread_rack", "infiniband"])
    )
    if rule == "keep_rack":
        ask["topology"] = {"keep_within": "rack"}
    elif rule == "keep_fabric":
        ask["topology"] = {"keep_within": "fabric"}
    elif rule == "spread_rack":
        ask["topology"] = {"spread": "rack"}
    elif rule == "infiniband":
        ask["network"] = {"interconnect": "infiniband"}
    if draw(st.integers(0, 5)) == 0:
        ask.setdefault("node_selection", {})["match_labels"] = {"team": "a"}
    return ask


def compare(session: PlacementSession, ask: dict[str, Any], held: frozenset[str]) -> None:
    """The class search and the search machine by machine agree, now and on the idle cluster;
    so do the machines no filter rejects, counted by class and one by one, with their GPUs
    and workers (what an explanation tells a run short of room)."""
    needs = Needs(run(RUN[1], ask=ask))
    rungs = ladder.allowed_rungs(needs)
    prepared = session._prepare(needs, NOW, held)
    current = session._evaluation(prepared)
    index = session._free_index
    assert gang.search(current, rungs, index) == gang.reference_search(current, rungs, index)
    idle = session._idle_evaluation(prepared)
    assert gang.search(idle, rungs) == gang.reference_search(idle, rungs)
    if needs.keep_within is None:
        for evaluation in (current, idle):
            by_class = by_site(evaluation, survivors._eligible(evaluation))
            assert by_class == by_site(evaluation, survivors.eligible_by_machine(evaluation))


def by_site(
    evaluation: RunEvaluation, eligible: list[tuple[str, int, int]]
) -> dict[str, tuple[int, int, list[int]]]:
    """Each site's machines, their GPUs, and the workers of each shape they could take."""
    found: dict[str, tuple[int, int, list[int]]] = {}
    for site, i, alike in eligible:
        machines, gpus, workers = found.get(site, (0, 0, [0] * len(evaluation.options)))
        slots = [evaluation.slots(i, option) * alike for option in evaluation.options]
        found[site] = (
            machines + alike,
            gpus + evaluation.cap(i) * alike,
            [had + more for had, more in zip(workers, slots, strict=True)],
        )
    return found


ONE_GPU = {"gpu_requests": {"count": 1}, "per_gpu": {"cpu_cores": 4}}


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    snap=alike_clusters(),
    ask=gang_asks(),
    held=st.sets(st.integers(0, 39), max_size=3),
    takes=st.integers(0, 8),
)
def test_class_search_equals_judging_every_machine(
    snap: ClusterSnapshot, ask: dict[str, Any], held: set[int], takes: int
) -> None:
    """After each of a pass's placements (1-GPU runs and the gang itself), with machines held
    for a run ahead or not, both searches choose the same rung, shape, group and machines."""
    names = frozenset(view.name for k, view in enumerate(snap.machines) if k in held)
    session = PlacementSession(snap)
    for step in range(takes + 1):
        compare(session, ask, frozenset())
        if names:
            compare(session, ask, names)
        small = session.place(run(f"one-{step}", ask=ONE_GPU), NOW)
        if isinstance(small, Placement):
            session.take(small)
        if step % 4 == 3:
            whole = session.place(run(f"gang-{step}", ask=ask), NOW)
            if isinstance(whole, Placement):
                session.take(whole)


def changed(snap: ClusterSnapshot, picks: list[int], used: list[int]) -> ClusterSnapshot:
    """The cluster with the picked machines' GPUs in use changed (their descriptions kept)."""
    views = list(snap.machines)
    for k, count in zip(picks, used, strict=False):
        view = views[k % len(views)]
        report = view.report
        assert report is not None
        ids = frozenset(gpu.uuid for gpu in report.gpus[:count])
        views[k % len(views)] = dataclasses.replace(view, used_gpu_ids=ids)
    return ClusterSnapshot(machines=tuple(views))


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    snap=alike_clusters(),
    ask=gang_asks(),
    rounds=st.lists(
        st.tuples(
            st.lists(st.integers(0, 39), min_size=1, max_size=3),
            st.lists(st.integers(0, 8), min_size=1, max_size=4),
        ),
        max_size=5,
    ),
)
def test_class_search_follows_the_live_state(
    snap: ClusterSnapshot, ask: dict[str, Any], rounds: list[tuple[list[int], list[int]]]
) -> None:
    """Sessions of one live state, whose machines' holdings change between them: the classes
    kept from the session before are brought up to date, never read stale."""
    live = LiveState()
    live.update(snap)
    compare(PlacementSession(live=live), ask, frozenset())
    for picks, used in rounds:
        snap = changed(snap, picks, used)
        live.update(snap)
        compare(PlacementSession(live=live), ask, frozenset())


def rack_of_alike(count: int, pressure: frozenset[str] = frozenset()) -> ClusterSnapshot:
    """Idle 8-GPU machines, 4 to a rack, all alike but for CPU pressure on some."""
    return snapshot(
        *(
            machine(
                f"m{i:03d}",
                gpu_count=8,
                rack=f"rack-{i // 4}",
                cpu_pressure=f"m{i:03d}" in pressure,
            )
            for i in range(count)
        )
    )


def test_tied_racks_go_to_the_first_group_as_before() -> None:
    """Every rack holds the gang alike: the class search scores one class, not every machine,
    and lands where judging every machine does, the first group by name."""
    snap = rack_of_alike(40)
    result = PlacementSession(snap).place(run(ask={"gpu_requests": {"count": 16}}), NOW)
    assert isinstance(result, Placement)
    assert result.landing.rung == "rack"
    assert result.landing.machines == ["m000", "m001"]


def test_a_machine_under_pressure_is_judged_on_its_own() -> None:
    """CPU pressure (-20) is the machine's own, not its class's: racks tied on room go to the
    one whose best machines score most, as scoring each machine would, and within a rack the
    pressured machines are taken last."""
    snap = rack_of_alike(12, pressure=frozenset({"m000", "m001", "m005", "m006", "m007"}))
    result = PlacementSession(snap).place(run(ask={"gpu_requests": {"count": 24}}), NOW)
    assert isinstance(result, Placement)
    assert result.landing.machines == ["m008", "m009", "m010"]
    result = PlacementSession(snap).place(run(ask={"gpu_requests": {"count": 16}}), NOW)
    assert isinstance(result, Placement)
    assert result.landing.machines == ["m002", "m003"]
