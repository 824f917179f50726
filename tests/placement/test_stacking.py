"""`mode: Any`: "Workers may share a machine" — stacking, and where it never happens."""

from datetime import UTC, datetime
from typing import Any

import pytest

from astraeus.coordinator.placement import Pending, Placement, PlacementSession, place
from astraeus.coordinator.testing.fake_cluster import machine, run, snapshot
from astraeus.shared.fake_gpu import gpu_uuid

NOW = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
ANY_TWO = {"mode": "Any", "names": ["eth1", "eth2"]}
SIXTEEN_ON_FOUR = {"gpu_requests": {"count": 16}, "machines": 4, "node_selection": ANY_TWO}


def two_free_machines() -> Any:
    return snapshot(machine("eth1"), machine("eth2"), machine("eth3"))


def test_any_mode_stacks_four_workers_on_two_eight_gpu_machines() -> None:
    """The issue's reproduction: 16 GPUs, machines 4, Any, names eth1,eth2 on two free 8-GPU
    machines places 4 workers × 4 GPUs, two on each machine, each with its own GPUs."""
    result = place(run(ask=SIXTEEN_ON_FOUR), two_free_machines(), NOW)
    assert isinstance(result, Placement)
    assert [(w.index, w.machine) for w in result.workers] == [
        (0, "eth1"),
        (1, "eth1"),
        (2, "eth2"),
        (3, "eth2"),
    ]
    assert [w.gpu_ids for w in result.workers[:2]] == [
        tuple(gpu_uuid("eth1", i) for i in range(4)),
        tuple(gpu_uuid("eth1", i) for i in range(4, 8)),
    ]
    assert (result.shape.tasks, result.shape.gpus_each) == (4, 4)
    assert result.shape.why == "4 workers × 4 GPUs on 2 machines over Ethernet"
    assert result.landing.machines == ["eth1", "eth2"]


def test_exact_mode_never_stacks_and_says_machines_are_short() -> None:
    """The same run in Exact mode waits, and says it needs 4 machines, not more GPUs."""
    ask = {**SIXTEEN_ON_FOUR, "node_selection": {**ANY_TWO, "mode": "Exact"}}
    result = place(run(ask=ask), two_free_machines(), NOW)
    assert isinstance(result, Pending)
    short = "the whole run does not fit: need 4 machines with room for a 4-GPU worker, 2 have it"
    assert [node.reasons for node in result.explanation.nodes] == [
        [short],
        [short],
        ["machine is not among the run's names"],
    ]


def test_cpu_only_any_count_three_stacks_on_one_machine() -> None:
    """The issue's second reproduction: a CPU-only run, Any, count 3, on one machine."""
    ask = {"cpu_cores": 2, "node_selection": {"mode": "Any", "count": 3}}
    result = place(run(ask=ask), snapshot(machine("cpu-01", gpu_count=0)), NOW)
    assert isinstance(result, Placement)
    assert [w.machine for w in result.workers] == ["cpu-01"] * 3
    assert [w.cpu_cores for w in result.workers] == [2, 2, 2]
    assert result.shape.why == "3 workers on cpu-01"
    assert result.landing.rung == "node"


def test_stacking_stops_at_the_machines_free_cores() -> None:
    """A machine takes only as many workers as its free cores hold; the rest go elsewhere."""
    ask = {"cpu_cores": 4, "node_selection": {"mode": "Any", "count": 3}}
    snap = snapshot(
        machine("cpu-01", gpu_count=0, cpu_cores=8),
        machine("cpu-02", gpu_count=0, cpu_cores=8, used_cores=2),
    )
    result = place(run(ask=ask), snap, NOW)
    assert isinstance(result, Placement)
    assert [w.machine for w in result.workers] == ["cpu-01", "cpu-01", "cpu-02"]
    assert result.shape.why == "3 workers on 2 machines over Ethernet"


def test_stacking_keeps_within_free_memory_of_per_gpu_asks() -> None:
    """Per-GPU memory bounds how many 2-GPU workers one machine takes."""
    ask = {
        "gpu_requests": {"count": 8},
        "per_gpu": {"memory_bytes": 100 * 1024**3},
        "machines": 4,
        "node_selection": {"mode": "Any"},
    }
    snap = snapshot(machine("a", memory_gib=450), machine("b", memory_gib=1024))
    result = place(run(ask=ask), snap, NOW)
    assert isinstance(result, Placement)
    assert sorted(w.machine for w in result.workers).count("a") <= 2


def test_all_workers_that_fit_one_machine_land_on_the_one_machine_rung() -> None:
    """Any with `machines: 2` on a machine that holds both workers is placed on one machine."""
    ask = {"gpu_requests": {"count": 8}, "machines": 2, "node_selection": {"mode": "Any"}}
    result = place(run(ask=ask), snapshot(machine("gpu-01"), machine("gpu-02")), NOW)
    assert isinstance(result, Placement)
    assert result.landing.where == "one machine, gpu-01"
    assert result.shape.why == "2 workers × 4 GPUs on gpu-01"
    assert {w.machine for w in result.workers} == {"gpu-01"}


@pytest.mark.parametrize(
    "rule",
    [
        pytest.param({"topology": {"spread": "node"}}, id="spread-node"),
        pytest.param({"gpu_requests": {"count": 16, "policy": "PerNode"}}, id="per-node"),
    ],
)
def test_one_worker_per_machine_rules_keep_any_from_stacking(rule: dict[str, Any]) -> None:
    """`topology.spread` and `policy: PerNode` put one worker per machine even in Any mode."""
    result = place(run(ask={**SIXTEEN_ON_FOUR, **rule}), two_free_machines(), NOW)
    assert isinstance(result, Pending)


def test_a_session_never_gives_a_machine_more_than_it_has() -> None:
    """Two stacking runs in one pass share a machine's GPUs without giving one twice."""
    session = PlacementSession(snapshot(machine("gpu-01")))
    ask = {"gpu_requests": {"count": 4}, "machines": 2, "node_selection": {"mode": "Any"}}
    first = session.place(run("a", ask=ask), NOW)
    assert isinstance(first, Placement)
    session.take(first)
    second = session.place(run("b", ask=ask), NOW)
    assert isinstance(second, Placement)
    session.take(second)
    given = [gpu for p in (first, second) for w in p.workers for gpu in w.gpu_ids]
    assert len(given) == len(set(given)) == 8
    third = session.place(run("c", ask=ask), NOW)
    assert isinstance(third, Pending)
