"""What keeps out machines that pass every filter when the whole run does not fit: the reason
names what is short — GPUs, machines, workers, sites or racks — and never contradicts itself."""

from datetime import UTC, datetime
from typing import Any

import pytest

from astraeus.coordinator.placement import Pending, place
from astraeus.coordinator.testing.fake_cluster import machine, rdma_port, run, snapshot

NOW = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
SITE = "topology.astraeus.io/site"


def reasons_of(ask: dict[str, Any], *machines: Any) -> list[list[str]]:
    result = place(run(ask=ask), snapshot(*machines), NOW)
    assert isinstance(result, Pending)
    return [node.reasons for node in result.explanation.nodes]


def test_candidates_in_two_sites_span_sites_for_machines() -> None:
    """The issue's `--gpus 8 --names eth1,ib3 --machines 2`, eth1 in fra-1 and ib3 in another
    site: the guide's `no single site can hold the whole run; it would span 2 sites …`."""
    names = {"names": ["eth1", "ib3"]}
    ask = {"gpu_requests": {"count": 8}, "machines": 2, "node_selection": names}
    text = (
        "no single site can hold the whole run; it would span 2 sites (networks), "
        "the largest, fra-1, has room for 1 of 2 machines"
    )
    found = reasons_of(
        ask,
        machine("eth1", labels_={SITE: "fra-1"}, used_gpus=range(4)),
        machine("ib3", labels_={SITE: "ams-1"}),
    )
    assert found == [[text], [text]]


def test_any_mode_spans_sites_in_workers() -> None:
    """Workers that may share machines count as workers when only two sites together hold them."""
    ask = {"cpu_cores": 4, "node_selection": {"mode": "Any", "count": 4}}
    text = (
        "no single site can hold the whole run; it would span 2 sites (networks), "
        "the largest, fra-1, has room for 2 of 4 workers"
    )
    found = reasons_of(
        ask,
        machine("a", gpu_count=0, cpu_cores=8, labels_={SITE: "ams-1"}),
        machine("b", gpu_count=0, cpu_cores=8, labels_={SITE: "fra-1"}),
    )
    assert found == [[text], [text]]


def test_enough_gpus_on_too_few_machines_says_machines() -> None:
    """16 GPUs free on 2 machines for a 4-machine run: the shortfall is machines, not GPUs."""
    ask = {"gpu_requests": {"count": 16}, "machines": 4}
    text = "the whole run does not fit: need 4 machines with room for a 4-GPU worker, 2 have it"
    assert reasons_of(ask, machine("a"), machine("b")) == [[text], [text]]


def test_cpu_run_short_of_machines_says_so() -> None:
    """A CPU run of 3 workers, one per machine, on 2 machines."""
    ask = {"cpu_cores": 1, "machines": 3}
    text = "the whole run does not fit: need 3 machines with room for a worker, 2 have it"
    found = reasons_of(ask, machine("a", gpu_count=0), machine("b", gpu_count=0))
    assert found == [[text], [text]]


def test_any_mode_short_of_room_for_workers_says_workers() -> None:
    """Workers that stack but do not all fit: how many the machines have room for."""
    ask = {"cpu_cores": 4, "node_selection": {"mode": "Any", "count": 5}}
    text = "the whole run does not fit: need room for 5 workers, 2 machines have room for 4"
    found = reasons_of(
        ask, machine("a", gpu_count=0, cpu_cores=8), machine("b", gpu_count=0, cpu_cores=8)
    )
    assert found == [[text], [text]]


def test_short_of_gpus_on_one_machine_is_singular() -> None:
    """`on 1 machine`, not `on 1 machines`."""
    ask = {"gpu_requests": {"count": 16}}
    text = "the whole run does not fit: need 16 GPUs, 8 free and usable on 1 machine"
    found = reasons_of(ask, machine("a"), machine("b", used_gpus=range(8)))
    assert found[0] == [text]


@pytest.mark.parametrize(
    ("spread", "label", "noun"),
    [
        pytest.param("rack", "topology.astraeus.io/rack", "racks", id="rack"),
        pytest.param("fabric", "topology.astraeus.io/fabric", "fabrics", id="fabric"),
    ],
)
def test_spread_short_of_racks_says_racks(spread: str, label: str, noun: str) -> None:
    """Three machines in two racks for a 3-worker spread run: the shortfall is racks."""
    ask = {"gpu_requests": {"count": 24}, "machines": 3, "topology": {"spread": spread}}
    text = (
        f"the whole run does not fit: need 3 {noun} with room for a 8-GPU worker "
        f"(topology.spread: {spread}), 2 have it"
    )
    found = reasons_of(
        ask,
        machine("a", labels_={label: "x"}, ports=[rdma_port()]),
        machine("b", labels_={label: "x"}, ports=[rdma_port()]),
        machine("c", labels_={label: "y"}, ports=[rdma_port()]),
    )
    assert found == [[text], [text], [text]]
