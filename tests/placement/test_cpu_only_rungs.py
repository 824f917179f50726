"""A run without GPUs skips the NVLink and RDMA rungs (after one machine, rack and Ethernet)
unless it asks for an interconnect or a rule that names an NVLink domain or fabric: otherwise
the tighter rung put its workers on InfiniBand GPU machines while CPU machines sat idle."""

from datetime import UTC, datetime
from typing import Any

from astraeus.coordinator.placement import ClusterSnapshot, Placement, place
from astraeus.coordinator.testing.fake_cluster import gpus, machine, rdma_port, run, snapshot
from astraeus.shared import NetworkKind

NOW = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
TWO_CPU_WORKERS: dict[str, Any] = {"machines": 2, "cpu_cores": 8}


def placed(ask: dict[str, Any], snap: ClusterSnapshot) -> Placement:
    result = place(run(ask=ask), snap, NOW)
    assert isinstance(result, Placement), result
    return result


def cluster(**cpu: Any) -> ClusterSnapshot:
    """Two InfiniBand H100 machines of fabric ib-0 and two CPU machines, all idle."""
    ib = [rdma_port()]
    return snapshot(
        machine("gpu-1", ports=ib, fabric="ib-0"),
        machine("gpu-2", ports=ib, fabric="ib-0"),
        machine("cpu-1", gpu_count=0, **cpu),
        machine("cpu-2", gpu_count=0, **cpu),
    )


def test_cpu_workers_go_to_cpu_machines_over_ethernet() -> None:
    """Two CPU workers land on the two CPU machines, not on the InfiniBand GPU machines."""
    result = placed(TWO_CPU_WORKERS, cluster())
    assert result.landing.machines == ["cpu-1", "cpu-2"]
    assert (result.landing.rung, result.network) == ("ethernet", NetworkKind.ETHERNET)
    result = placed(TWO_CPU_WORKERS, cluster(rack="r1"))
    assert (result.landing.rung, result.landing.machines) == ("rack", ["cpu-1", "cpu-2"])


def test_rung_one_still_comes_first() -> None:
    """Workers that may share a machine still take one machine first."""
    ask = {**TWO_CPU_WORKERS, "node_selection": {"mode": "Any"}}
    result = placed(ask, cluster())
    assert (result.landing.rung, result.network) == ("node", NetworkKind.LOCAL)


def test_an_interconnect_or_a_fabric_rule_keeps_the_rdma_rungs() -> None:
    """Asking for RDMA, InfiniBand or a port speed, or never leaving a fabric, keeps the ladder
    whole: such CPU workers still get the InfiniBand fabric."""
    asks: list[dict[str, Any]] = [
        {"network": {"interconnect": "rdma"}},
        {"network": {"interconnect": "infiniband"}},
        {"network": {"min_gbps": 200}},
        {"topology": {"keep_within": "fabric"}},
    ]
    for extra in asks:
        result = placed({**TWO_CPU_WORKERS, **extra}, cluster())
        assert result.landing.rung == "fabric", extra
        assert result.landing.machines == ["gpu-1", "gpu-2"], extra


def test_an_nvlink_rule_keeps_the_nvlink_rung() -> None:
    """`interconnect: nvlink` on CPU workers still means one NVLink domain."""
    domain = [machine(name, gpu_list=gpus(name, 4, nvlink_domain="nvl-1")) for name in ("n1", "n2")]
    snap = snapshot(*domain, machine("cpu-1", gpu_count=0), machine("cpu-2", gpu_count=0))
    result = placed({**TWO_CPU_WORKERS, "network": {"interconnect": "nvlink"}}, snap)
    assert (result.landing.rung, result.landing.machines) == ("nvlink_domain", ["n1", "n2"])
    result = placed(TWO_CPU_WORKERS, snap)
    assert (result.landing.rung, result.landing.machines) == ("ethernet", ["cpu-1", "cpu-2"])
