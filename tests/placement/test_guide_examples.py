"""One test per example in the product guide's GPUs and placement page."""

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from astraeus.coordinator.placement import ClusterSnapshot, Pending, Placement, gpu_match, place
from astraeus.coordinator.placement.gpu_match import GIB, least_memory_bytes
from astraeus.coordinator.testing.fake_cluster import (
    gpus,
    machine,
    rdma_port,
    run,
    snapshot,
)
from astraeus.shared import (
    GpuHealthState,
    GpuInfo,
    GpuRequests,
    NetworkKind,
    RequestedResources,
    Vendor,
)
from astraeus.shared.fake_gpu import gpu_uuid

NOW = datetime(2026, 10, 1, 9, 14, 2, 511843, tzinfo=UTC)

FINETUNE = {
    "gpu_requests": {
        "count": 8,
        "models": ["H100", "H200"],
        "min_memory_gb": 80,
        "healthy_only": True,
        "min_per_machine": 8,
    },
    "per_gpu": {"cpu_cores": 12, "memory_bytes": 128849018880},
}

API_DOC = (Path(__file__).parent.parent.parent / "docs" / "api.md").read_text()
GUIDE_PLACEMENT_JSON = (Path(__file__).parent.parent / "data" / "guide_pending.json").read_text()


def three_machines() -> ClusterSnapshot:
    a100 = gpus("gpu-01", 8, model="NVIDIA A100-SXM4-40GB", memory_gib=39.5)
    return snapshot(
        machine("gpu-01", gpu_list=a100),
        machine(
            "gpu-02",
            cpu_cores=192,
            memory_gib=2048,
            used_gpus=range(4),
            used_cores=48,
            used_memory_gib=480,
        ),
        machine("gpu-03", cordon="firmware update"),
    )


def test_three_machine_pending_example_matches_guide_json() -> None:
    """The guide's finetune run on its three machines waits with exactly the guide's JSON."""
    result = place(run("finetune", ask=FINETUNE), three_machines(), NOW)
    assert isinstance(result, Pending)
    assert result.headline == "No machine fits: 3 of 3 machines ready"
    got = json.loads(result.explanation.model_dump_json())
    want = json.loads(GUIDE_PLACEMENT_JSON)
    del got["evaluated_at"], want["evaluated_at"]
    assert got == want
    assert result.wanted_machines == ("gpu-02",)


def test_three_machine_example_carries_the_api_guide_s_rejections() -> None:
    """The guide's example carries, next to its JSON, the rejections docs/api.md prints for it."""
    result = place(run("finetune", ask=FINETUNE), three_machines(), NOW)
    assert isinstance(result, Pending)
    printed = [
        '{"filter":"gpus","code":"NoGPUModel","room":false,"machines":["gpu-01"]}',
        '{"filter":"gpus","code":"InsufficientGPUs","room":true,"machines":["gpu-02"]}',
        '{"filter":"accepting","code":"Cordoned","room":false,"machines":["gpu-03"]}',
    ]
    assert [group.model_dump_json() for group in result.rejections] == printed
    assert all(line in API_DOC for line in printed)


def test_finetune_ask_places_on_an_idle_h100_with_per_gpu_cores_and_memory() -> None:
    """The guide's finetune ask takes all 8 GPUs of one H100 machine, with 8× the per-GPU ask."""
    result = place(run("finetune", ask=FINETUNE), snapshot(machine("gpu-09")), NOW)
    assert isinstance(result, Placement)
    (worker,) = result.workers
    assert worker.gpu_ids == tuple(gpu_uuid("gpu-09", i) for i in range(8))
    assert worker.cpu_cores == 96
    assert worker.memory_bytes == 8 * 128849018880


def test_memory_ask_has_half_a_gigabyte_of_slack() -> None:
    """An 80 GB H100 reporting 79.6 GB matches `min_memory_gb: 80`."""
    ask = {"gpu_requests": {"count": 1, "min_memory_gb": 80}}
    result = place(run(ask=ask), snapshot(machine("gpu-01")), NOW)
    assert isinstance(result, Placement)


def test_healthy_only_waits_naming_the_at_risk_gpus() -> None:
    """With `healthy_only` a machine with 2 GPUs at risk says `needs 8 healthy GPUs, 6 free
    (2 more free but at risk)`."""
    risky = gpus("gpu-01", 8, at_risk=(6, 7))
    ask = {"gpu_requests": {"count": 8, "healthy_only": True}}
    result = place(run(ask=ask), snapshot(machine("gpu-01", gpu_list=risky)), NOW)
    assert isinstance(result, Pending)
    assert result.explanation.nodes[0].reasons == [
        "needs 8 healthy GPUs, 6 free (2 more free but at risk)"
    ]
    assert result.headline == "needs 8 healthy GPUs, 6 free (2 more free but at risk)"


def test_at_risk_gpus_are_used_only_when_no_healthy_one_is_free() -> None:
    """Without `healthy_only`, a worker takes the healthy GPUs first, then the at-risk ones."""
    risky = gpus("gpu-01", 8, at_risk=(0, 1))
    ask = {"gpu_requests": {"count": 7}}
    result = place(run(ask=ask), snapshot(machine("gpu-01", gpu_list=risky)), NOW)
    assert isinstance(result, Placement)
    assert result.workers[0].gpu_ids[:6] == tuple(gpu_uuid("gpu-01", i) for i in range(2, 8))
    assert result.workers[0].gpu_ids[6] == gpu_uuid("gpu-01", 0)
    assert risky[0].health.state is GpuHealthState.AT_RISK


def test_machines_must_divide_the_gpu_count() -> None:
    """`machines: 5` with 12 GPUs is refused with the guide's `Cannot plan workers` text."""
    with pytest.raises(ValidationError, match="cannot evenly distribute 12 gpus across 5 machines"):
        RequestedResources.model_validate({"gpu_requests": {"count": 12}, "machines": 5})


def test_two_by_eight_on_one_infiniband_fabric_says_why() -> None:
    """16 GPUs on two idle 8-GPU machines of fabric ib-0 land as the guide's example shape."""
    snap = snapshot(*(machine(f"gpu-0{i}", ports=[rdma_port()], fabric="ib-0") for i in (1, 2)))
    result = place(run(ask={"gpu_requests": {"count": 16}}), snap, NOW)
    assert isinstance(result, Placement)
    assert result.shape.model_dump() == {
        "tasks": 2,
        "gpus_each": 8,
        "why": "2 machines × 8 GPUs on InfiniBand fabric ib-0",
    }
    assert result.landing.where == "one InfiniBand fabric, ib-0"
    assert result.network is NetworkKind.INFINIBAND


def test_four_by_four_in_one_fabric_beats_two_by_eight_over_ethernet() -> None:
    """A 4×4 inside one InfiniBand fabric beats a 2×8 over Ethernet."""
    fabric = [
        machine(f"ib-{i}", ports=[rdma_port()], fabric="ib-0", used_gpus=range(4)) for i in range(4)
    ]
    ethernet = [machine(f"eth-{i}") for i in range(2)]
    result = place(run(ask={"gpu_requests": {"count": 16}}), snapshot(*fabric, *ethernet), NOW)
    assert isinstance(result, Placement)
    assert (result.shape.tasks, result.shape.gpus_each) == (4, 4)
    assert result.landing.machines == ["ib-0", "ib-1", "ib-2", "ib-3"]


def test_node_selection_example_stays_on_the_named_machines_of_its_pool_and_site() -> None:
    """The guide's node_selection (Any, three names, pool and site labels) picks among them."""
    site = "topology.astraeus.io/site"
    ask = {
        "gpu_requests": {"count": 8},
        "node_selection": {
            "mode": "Any",
            "names": ["gpu-07", "gpu-08", "gpu-09"],
            "match_labels": {"pool": "h100", site: "fra-1"},
        },
    }
    fra = {"pool": "h100", site: "fra-1"}
    snap = snapshot(
        machine("gpu-06", labels_=fra),
        machine("gpu-07", labels_={"pool": "h100", site: "ams-1"}),
        machine("gpu-08", labels_=fra, used_gpus=range(2)),
        machine("gpu-09", labels_=fra),
    )
    result = place(run(ask=ask), snap, NOW)
    assert isinstance(result, Placement)
    assert result.landing.machines == ["gpu-09"]
    busy = place(run(ask=ask), snapshot(*snap.machines[:3]), NOW)
    assert isinstance(busy, Pending)
    assert [node.reasons for node in busy.explanation.nodes] == [
        ["machine is not among the run's names"],
        ["machine lacks label topology.astraeus.io/site=fra-1"],
        ["insufficient gpus: need 8, 6 free and usable"],
    ]


def test_pre_training_example_stays_on_fast_infiniband_in_one_rack() -> None:
    """The guide's 64-GPU run (InfiniBand at 400 Gb/s, one rack) takes 8 machines of one rack."""
    ask = {
        "gpu_requests": {"count": 64, "min_per_machine": 8},
        "per_gpu": {"cpu_cores": 12, "memory_bytes": 128849018880},
        "network": {"interconnect": "infiniband", "min_gbps": 400},
        "topology": {"keep_within": "rack", "patience_seconds": 1800},
    }
    racks = [
        machine(f"r{rack}-{i}", rack=f"r{rack}", fabric="ib-0", ports=[rdma_port(gbps=400)])
        for rack in (1, 2)
        for i in range(6 if rack == 1 else 8)
    ]
    slow = [machine(f"s-{i}", rack="r3", ports=[rdma_port(gbps=200)]) for i in range(8)]
    result = place(run(ask=ask, first_evaluated_at=NOW), snapshot(*racks, *slow), NOW)
    assert isinstance(result, Placement)
    assert result.landing.machines == [f"r2-{i}" for i in range(8)]
    assert result.landing.where == "one InfiniBand fabric and one rack, ib-0 and r2"
    assert result.shape.why == "8 machines × 8 GPUs on InfiniBand fabric ib-0 in rack r2"
    assert {worker.cpu_cores for worker in result.workers} == {96}


def _card(memory_bytes: int) -> GpuInfo:
    return GpuInfo(
        index=0, uuid="GPU-0", vendor=Vendor.NVIDIA, model="H100", memory_bytes=memory_bytes
    )


@pytest.mark.parametrize(
    ("ask", "card", "matched"),
    [
        pytest.param(80.1, round(79.65 * GIB), True, id="80.1-on-79.65"),
        pytest.param(80.15, round(79.65 * GIB), True, id="80.15-on-79.65"),
        pytest.param(80.16, round(79.65 * GIB), False, id="80.16-on-79.65"),
        pytest.param(80.1, least_memory_bytes(80.1), True, id="at-the-byte"),
        pytest.param(80.1, least_memory_bytes(80.1) - 1, False, id="a-byte-short"),
        pytest.param(80, 81559 * 1024**2, True, id="h100-81559-mib"),
    ],
)
def test_memory_asks_compare_exactly_in_bytes(ask: float, card: int, matched: bool) -> None:
    """`min_memory_gb` less the slack is compared with the card's bytes exactly: the ask as
    written, in GiB, rounded up to a whole byte, never a float's neighbour."""
    assert gpu_match.matches(GpuRequests(count=1, min_memory_gb=ask), _card(card)) is matched
    assert least_memory_bytes(80.1) == 85469849191  # 79.6 × 2**30 = …190.4
