"""The run's shape: every even split, narrowed by the run's rules; CPU-only worker counts."""

from datetime import UTC, datetime
from typing import Any

import pytest

from astraeus.coordinator.placement import Placement, place
from astraeus.coordinator.placement.needs import Needs
from astraeus.coordinator.placement.shape import options
from astraeus.coordinator.testing.fake_cluster import machine, run, snapshot

NOW = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)


def shapes(ask: dict[str, Any]) -> list[tuple[int, int]]:
    return [(option.tasks, option.gpus_each) for option in options(Needs(run(ask=ask)))]


@pytest.mark.parametrize(
    ("ask", "want"),
    [
        pytest.param(
            {"gpu_requests": {"count": 16}},
            [(1, 16), (2, 8), (4, 4), (8, 2), (16, 1)],
            id="every-even-split",
        ),
        pytest.param({"gpu_requests": {"count": 12}, "machines": 3}, [(3, 4)], id="machines-exact"),
        pytest.param(
            {"gpu_requests": {"count": 16, "min_per_machine": 4}},
            [(1, 16), (2, 8), (4, 4)],
            id="min-per-machine",
        ),
        pytest.param(
            {"gpu_requests": {"count": 12, "policy": "PerNode"}},
            [(3, 4), (6, 2), (12, 1)],
            id="per-node-powers-of-two",
        ),
        pytest.param(
            {"gpu_requests": {"count": 16}, "topology": {"min_nodes": 2, "max_nodes": 4}},
            [(2, 8), (4, 4)],
            id="min-max-nodes",
        ),
        pytest.param(
            {"gpu_requests": {"count": 16}, "topology": {"keep_within": "node"}},
            [(1, 16)],
            id="keep-within-node",
        ),
        pytest.param({"gpu_requests": {"count": 2, "ids": ["0", "1"]}}, [(1, 2)], id="pinned-ids"),
        pytest.param({}, [(1, 0)], id="cpu-one-worker"),
        pytest.param({"machines": 3}, [(3, 0)], id="cpu-machines"),
        pytest.param({"node_selection": {"count": 4}}, [(4, 0)], id="cpu-count"),
        pytest.param({"node_selection": {"names": ["a", "b"]}}, [(2, 0)], id="cpu-names-exact"),
        pytest.param(
            {"node_selection": {"names": ["a", "b"], "mode": "Any"}}, [(1, 0)], id="cpu-names-any"
        ),
    ],
)
def test_shape_options(ask: dict[str, Any], want: list[tuple[int, int]]) -> None:
    """The shapes the run allows, fewest machines first."""
    assert shapes(ask) == want


def test_no_even_split_is_explained() -> None:
    """A run whose rules leave no shape waits saying so."""
    ask = {"gpu_requests": {"count": 12, "policy": "PerNode"}, "topology": {"max_nodes": 2}}
    result = place(run(ask=ask), snapshot(machine("a"), machine("b")), NOW)
    assert not isinstance(result, Placement)
    assert result.headline == "Cannot plan workers: no even split of 12 gpus meets the run's rules"


def test_per_gpu_scales_with_the_shape_a_fixed_ask_does_not() -> None:
    """Each of 2 workers with 4 GPUs gets 4× `per_gpu`; a fixed ask is the same per worker."""
    per_gpu = {"gpu_requests": {"count": 8}, "machines": 2, "per_gpu": {"cpu_cores": 3}}
    result = place(run(ask=per_gpu), snapshot(machine("a"), machine("b")), NOW)
    assert isinstance(result, Placement)
    assert [worker.cpu_cores for worker in result.workers] == [12, 12]
    fixed = {"gpu_requests": {"count": 8}, "machines": 2, "cpu_cores": 5}
    result = place(run(ask=fixed), snapshot(machine("a"), machine("b")), NOW)
    assert isinstance(result, Placement)
    assert [worker.cpu_cores for worker in result.workers] == [5, 5]


def test_cpu_run_over_named_machines_gets_one_worker_each() -> None:
    """A CPU run naming two machines (Exact) puts one worker on each."""
    ask = {"cpu_cores": 2, "node_selection": {"names": ["a", "c"]}}
    result = place(run(ask=ask), snapshot(machine("a"), machine("b"), machine("c")), NOW)
    assert isinstance(result, Placement)
    assert [worker.machine for worker in result.workers] == ["a", "c"]
    assert result.shape.why == "2 workers over Ethernet"


def test_mode_all_puts_a_worker_on_every_machine_that_can_take_one() -> None:
    """`mode: All` places one worker on every machine that passes the filters."""
    ask = {"cpu_cores": 2, "node_selection": {"mode": "All"}}
    snap = snapshot(machine("a"), machine("b", cordon="repair"), machine("c"))
    result = place(run(ask=ask), snap, NOW)
    assert isinstance(result, Placement)
    assert result.landing.machines == ["a", "c"]


def test_cpu_run_prefers_a_machine_without_gpus() -> None:
    """A CPU-only worker goes to a CPU machine over a GPU machine (−30 there)."""
    snap = snapshot(machine("a-gpu"), machine("b-cpu", gpu_count=0))
    result = place(run(ask={"cpu_cores": 4}), snap, NOW)
    assert isinstance(result, Placement)
    assert result.landing.machines == ["b-cpu"]
    assert result.workers[0].gpu_ids == ()
