"""Properties over random clusters and asks: what every placement must respect."""

from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from astraeus.coordinator.placement import (
    ClusterSnapshot,
    MachineSnapshot,
    Placement,
    place,
    score_breakdown,
)
from astraeus.coordinator.testing.fake_cluster import gpus, machine, rdma_port, run, snapshot
from astraeus.shared import GpuHealthState

NOW = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
RUNG_ORDER = ["node", "nvlink_domain", "fabric_rack", "fabric", "rdma_rack", "rdma", "rack"]
RESTRICTIONS: list[tuple[int, dict[str, Any]]] = [
    (0, {"topology": {"keep_within": "node"}}),
    (1, {"network": {"interconnect": "nvlink"}}),
    (3, {"network": {"interconnect": "infiniband"}}),
    (5, {"network": {"interconnect": "rdma"}}),
]
"""Rules that allow only the rungs up to an index: the run must not fit under one of them
when it landed below that rung."""


@st.composite
def machines(draw: st.DrawFn, index: int) -> MachineSnapshot:
    name = f"m{index:02d}"
    count = draw(st.sampled_from([0, 4, 8, 8, 8]))
    health = draw(
        st.lists(st.sampled_from(["ok"] * 8 + ["risk", "fault"]), min_size=count, max_size=count)
    )
    domain = draw(st.sampled_from([None, None, "nvl-0", "nvl-1"]))
    found = gpus(
        name,
        count,
        at_risk=[i for i, state in enumerate(health) if state == "risk"],
        faulted=[i for i, state in enumerate(health) if state == "fault"],
        nvlink_domain=domain,
    )
    used = draw(st.sets(st.integers(0, max(count - 1, 0)), max_size=3)) if count else set()
    ports = draw(
        st.sampled_from(
            [[], [rdma_port()], [rdma_port()], [rdma_port(roce=True)], [rdma_port(gbps=100)]]
        )
    )
    return machine(
        name,
        gpu_list=found,
        used_gpus=sorted(used),
        cpu_cores=64,
        used_cores=draw(st.sampled_from([0, 0, 16, 60])),
        rack=draw(st.sampled_from([None, "r0", "r1"])),
        fabric=draw(st.sampled_from([None, "ib-0", "ib-0", "ib-1"])),
        site=draw(st.sampled_from(["s1", "s1", "s1", "s2"])),
        ports=ports,
    )


@st.composite
def clusters(draw: st.DrawFn) -> ClusterSnapshot:
    size = draw(st.integers(1, 10))
    return snapshot(*(draw(machines(index)) for index in range(size)))


@st.composite
def asks(draw: st.DrawFn) -> dict[str, Any]:
    count = draw(st.sampled_from([1, 4, 8, 12, 16, 24, 32]))
    gpu_requests: dict[str, Any] = {"count": count, "healthy_only": draw(st.booleans())}
    ask: dict[str, Any] = {
        "gpu_requests": gpu_requests,
        "per_gpu": {"cpu_cores": draw(st.sampled_from([0, 2, 4]))},
    }
    if draw(st.booleans()):
        ask["node_selection"] = {"mode": "Any"}
        # `machines` counts workers in Any mode, so they stack when machines are few.
        ask["machines"] = draw(st.sampled_from([d for d in (1, 2, 4, 8) if count % d == 0]))
    rule = draw(st.sampled_from([None, "keep_rack", "spread_rack", "infiniband", "min_gbps"]))
    if rule == "keep_rack":
        ask["topology"] = {"keep_within": "rack"}
    elif rule == "spread_rack":
        ask["topology"] = {"spread": "rack"}
    elif rule == "infiniband":
        ask["network"] = {"interconnect": "infiniband"}
    elif rule == "min_gbps":
        ask["network"] = {"min_gbps": 400}
    return ask


def stacks(ask: dict[str, Any]) -> bool:
    """Workers may share a machine: Any mode without a one-worker-per-machine rule."""
    any_mode = ask.get("node_selection", {}).get("mode") == "Any"
    return any_mode and "spread" not in ask.get("topology", {})


def views(snap: ClusterSnapshot) -> dict[str, MachineSnapshot]:
    return {view.name: view for view in snap.machines}


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snap=clusters(), ask=asks())
def test_placements_break_no_rule(snap: ClusterSnapshot, ask: dict[str, Any]) -> None:
    """No GPU given twice or already used, no faulted GPU (no at-risk one with healthy_only),
    every worker gets `gpus_each`, one site, no machine gives more cores or memory than it has
    free, workers share a machine only in Any mode (and then on the one-machine rung when they
    all do), and the run's rules hold."""
    result = place(run(ask=ask), snap, NOW)
    if not isinstance(result, Placement):
        return
    by_name = views(snap)
    given_ids = [gpu for worker in result.workers for gpu in worker.gpu_ids]
    assert len(given_ids) == len(set(given_ids)) == ask["gpu_requests"]["count"]
    assert {len(worker.gpu_ids) for worker in result.workers} == {result.shape.gpus_each}
    assert len(result.workers) == result.shape.tasks
    machines_used = [by_name[worker.machine] for worker in result.workers]
    if not stacks(ask):
        assert len({view.name for view in machines_used}) == len(machines_used)
    assert len({view.site for view in machines_used}) == 1
    for name in {worker.machine for worker in result.workers}:
        view = by_name[name]
        assert view.report is not None
        mine = [worker for worker in result.workers if worker.machine == view.name]
        assert sum(w.cpu_cores for w in mine) <= view.report.cpu_cores - view.used_cpu_cores
        assert sum(w.memory_bytes for w in mine) <= (
            view.report.memory_bytes - view.used_memory_bytes
        )
    for worker in result.workers:
        view = by_name[worker.machine]
        assert view.report is not None
        states = {gpu.uuid: gpu.health.state for gpu in view.report.gpus}
        for gpu_id in worker.gpu_ids:
            assert gpu_id not in view.used_gpu_ids
            assert states[gpu_id] is not GpuHealthState.FAULTED
            if ask["gpu_requests"]["healthy_only"]:
                assert states[gpu_id] is GpuHealthState.HEALTHY
    racks = [view.labels.get("topology.astraeus.io/rack") for view in machines_used]
    if len(machines_used) > 1 and len({view.name for view in machines_used}) == 1:
        assert result.landing.rung == "node"
    if ask.get("topology", {}).get("keep_within") == "rack":
        assert len(set(racks)) == 1
        assert None not in racks
    if ask.get("topology", {}).get("spread") == "rack":
        assert len(set(racks)) == len(racks)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snap=clusters(), ask=asks())
def test_no_tighter_rung_could_have_held_it(snap: ClusterSnapshot, ask: dict[str, Any]) -> None:
    """A placed run could not have been placed under a rule allowing only tighter rungs."""
    if "topology" in ask or "network" in ask:
        return
    result = place(run(ask=ask), snap, NOW)
    if not isinstance(result, Placement):
        return
    landed = RUNG_ORDER.index(result.landing.rung) if result.landing.rung in RUNG_ORDER else 99
    for last, rule in RESTRICTIONS:
        if last < landed:
            tighter = place(run(ask={**ask, **rule}), snap, NOW)
            assert not isinstance(tighter, Placement), (rule, tighter)


def total_score(ask: dict[str, Any], view: MachineSnapshot, snap: ClusterSnapshot) -> int:
    gpus_taken = ask["gpu_requests"]["count"]
    breakdown = score_breakdown(run(ask=ask), view, gpus_taken, now=NOW, snapshot=snap)
    return sum(points for _name, points in breakdown)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snap=clusters(), ask=asks())
def test_single_worker_takes_the_best_scoring_machine(
    snap: ClusterSnapshot, ask: dict[str, Any]
) -> None:
    """A one-worker run lands on a machine no other able machine outscores (ties by name),
    although the session searches its index rather than scoring every machine."""
    count = ask["gpu_requests"]["count"]
    ask = {**ask, "gpu_requests": {**ask["gpu_requests"], "min_per_machine": count}}
    result = place(run(ask=ask), snap, NOW)
    if not isinstance(result, Placement):
        return
    (chosen,) = result.landing.machines
    by_name = views(snap)
    best = total_score(ask, by_name[chosen], snap)
    for view in snap.machines:
        alone = place(run(ask=ask), snapshot(view), NOW)
        if view.name == chosen or not isinstance(alone, Placement):
            continue
        score = total_score(ask, view, snap)
        assert score < best or (score == best and chosen < view.name), (view.name, score, best)
