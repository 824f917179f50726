"""The single-worker search over classes of alike machines finds what scoring them all finds."""

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from astraeus.coordinator.placement import Placement, PlacementSession, gang, single
from astraeus.coordinator.placement.model import ClusterSnapshot, MachineSnapshot
from astraeus.coordinator.placement.needs import Needs
from astraeus.coordinator.testing.fake_cluster import gpus, machine, run, snapshot

NOW = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)


@st.composite
def alike_machine(draw: st.DrawFn, index: int) -> MachineSnapshot:
    """Machines from a few templates, so that many are alike and tie."""
    name = f"m{index:03d}"
    count = draw(st.sampled_from([8, 8, 8, 4]))
    risky = draw(st.sampled_from([[], [], [], [0], [5]]))
    used = draw(st.sampled_from([[], [], [1], [1, 2], list(range(count))]))
    return machine(
        name,
        gpu_list=gpus(name, count, at_risk=[r for r in risky if r < count]),
        used_gpus=used,
        cpu_cores=draw(st.sampled_from([64, 64, 128])),
        used_cores=4 * len(used),
        labels_=draw(st.sampled_from([{}, {}, {"pool": "a"}])),
        cordon=draw(st.sampled_from([None, None, None, "maintenance"])),
    )


@st.composite
def alike_clusters(draw: st.DrawFn) -> ClusterSnapshot:
    size = draw(st.integers(1, 40))
    return snapshot(*(draw(alike_machine(index)) for index in range(size)))


def searched_and_scanned(session: PlacementSession, ask: dict[str, Any]) -> tuple[Any, Any]:
    needs = Needs(run(ask=ask))
    evaluation = session._evaluation(session._prepare(needs, NOW, frozenset()))
    gpus_each = ask["gpu_requests"]["count"]
    index = session._free_index
    return single.best(evaluation, index, gpus_each), gang._scan_single(evaluation, gpus_each)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    snap=alike_clusters(),
    count=st.sampled_from([1, 1, 2, 4, 8]),
    cores=st.sampled_from([0, 4, 16]),
    takes=st.integers(0, 30),
)
def test_class_search_equals_scoring_every_machine(
    snap: ClusterSnapshot, count: int, cores: int, takes: int
) -> None:
    """After any number of placements taken in a pass, the search picks the machine with the
    highest score, the lowest name among ties, exactly as scoring every machine does."""
    ask = {
        "gpu_requests": {"count": count, "min_per_machine": count},
        "per_gpu": {"cpu_cores": cores},
    }
    session = PlacementSession(snap)
    for step in range(takes + 1):
        searched, scanned = searched_and_scanned(session, ask)
        assert searched == scanned
        result = session.place(run(f"r{step}", ask=ask), NOW)
        if not isinstance(result, Placement):
            assert searched is None
            return
        session.take(result)
