"""The topology ladder, the network rules, fabrics and sites."""

from datetime import UTC, datetime, timedelta
from typing import Any

from astraeus.coordinator.placement import ClusterSnapshot, Pending, Placement, place
from astraeus.coordinator.testing.fake_cluster import gpus, machine, rdma_port, run, snapshot
from astraeus.shared import MachineReport, NetworkKind
from astraeus.shared.reasons import ReasonKind

NOW = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
SIXTEEN = {"gpu_requests": {"count": 16}}


def placed(ask: dict[str, Any], snap: ClusterSnapshot, **fields: Any) -> Placement:
    result = place(run(ask=ask, **fields), snap, NOW)
    assert isinstance(result, Placement), result
    return result


def pending(ask: dict[str, Any], snap: ClusterSnapshot, **fields: Any) -> Pending:
    result = place(run(ask=ask, **fields), snap, NOW)
    assert isinstance(result, Pending), result
    return result


def nvl(name: str, domain: str, **fields: Any) -> Any:
    return machine(name, gpu_list=gpus(name, 8, nvlink_domain=domain), **fields)


def ib(name: str, fabric: str | None = None, *, subnet: str | None = None, **fields: Any) -> Any:
    return machine(name, ports=[rdma_port(subnet=subnet)], fabric=fabric, **fields)


def roce(name: str, **fields: Any) -> Any:
    return machine(name, ports=[rdma_port(roce=True)], **fields)


def test_one_machine_first() -> None:
    """An 8-GPU run that fits on one machine lands there, on the local network."""
    result = placed({"gpu_requests": {"count": 8}}, snapshot(ib("a", "ib-0"), ib("b", "ib-0")))
    assert (result.landing.rung, result.network) == ("node", NetworkKind.LOCAL)
    assert result.shape.why == "1 machine × 8 GPUs on a"


def test_nvlink_domain_before_fabric() -> None:
    """Two machines of one NVLink domain win over two of one InfiniBand fabric."""
    snap = snapshot(ib("a", "ib-0"), ib("b", "ib-0"), nvl("c", "nvl-1"), nvl("d", "nvl-1"))
    result = placed(SIXTEEN, snap)
    assert (result.landing.rung, result.network) == ("nvlink_domain", NetworkKind.NVLINK)
    assert result.nvlink_domain == "nvl-1"
    assert result.landing.where == "one NVLink domain, nvl-1"
    assert result.shape.why == "2 machines × 8 GPUs in NVLink domain nvl-1"


def test_fabric_and_rack_before_fabric() -> None:
    """Inside one fabric, two machines of one rack win over two in different racks."""
    snap = snapshot(ib("a", "ib-0", rack="r1"), ib("b", "ib-0", rack="r2"))
    assert placed(SIXTEEN, snap).landing.rung == "fabric"
    snap = snapshot(
        ib("a", "ib-0", rack="r1"), ib("b", "ib-0", rack="r2"), ib("c", "ib-0", rack="r2")
    )
    result = placed(SIXTEEN, snap)
    assert result.landing.rung == "fabric_rack"
    assert result.landing.machines == ["b", "c"]
    assert result.landing.where == "one InfiniBand fabric and one rack, ib-0 and r2"


def test_rdma_rungs_for_unlabelled_rdma_machines_while_labels_exist_elsewhere() -> None:
    """RoCE machines without a fabric, in a cluster with fabric labels, land on the RDMA rungs."""
    snap = snapshot(roce("a", rack="r1"), roce("b", rack="r1"), ib("z", "ib-9"))
    result = placed(SIXTEEN, snap)
    assert (result.landing.rung, result.network) == ("rdma_rack", NetworkKind.RDMA)
    snap = snapshot(roce("a", rack="r1"), roce("b", rack="r2"), ib("z", "ib-9"))
    assert placed(SIXTEEN, snap).landing.rung == "rdma"


def test_rdma_machines_form_one_fabric_only_without_any_fabric_label() -> None:
    """Without fabric labels anywhere, RoCE machines count as one fabric (RDMA network)."""
    result = placed(SIXTEEN, snapshot(roce("a"), roce("b")))
    assert (result.landing.rung, result.network) == ("fabric", NetworkKind.RDMA)
    assert result.landing.where == "one RoCE fabric, roce"


def test_infiniband_and_roce_never_mixed() -> None:
    """One InfiniBand and one RoCE machine share no RDMA network: they meet over Ethernet."""
    result = placed(SIXTEEN, snapshot(ib("a"), roce("b")))
    assert (result.landing.rung, result.network) == ("ethernet", NetworkKind.ETHERNET)


def test_infiniband_fabric_from_the_subnet_and_the_label_wins() -> None:
    """Unlabelled InfiniBand machines group by subnet; a fabric label overrides the subnet."""
    snap = snapshot(ib("a", subnet="fe80::1"), ib("b", subnet="fe80::2"))
    assert placed(SIXTEEN, snap).landing.rung == "ethernet"
    snap = snapshot(ib("a", subnet="fe80::1"), ib("b", subnet="fe80::1"))
    assert placed(SIXTEEN, snap).landing.where == "one InfiniBand fabric, fe80::1"
    snap = snapshot(ib("a", "ib-0", subnet="fe80::1"), ib("b", "ib-0", subnet="fe80::2"))
    assert placed(SIXTEEN, snap).landing.where == "one InfiniBand fabric, ib-0"


def test_rack_over_ethernet_then_ethernet() -> None:
    """Machines without RDMA prefer one rack; otherwise Ethernet, named by the site."""
    snap = snapshot(machine("a", rack="r1"), machine("b", rack="r2"), machine("c", rack="r2"))
    result = placed(SIXTEEN, snap)
    assert (result.landing.rung, result.landing.machines) == ("rack", ["b", "c"])
    assert result.shape.why == "2 machines × 8 GPUs over Ethernet in rack r2"
    result = placed(SIXTEEN, snapshot(machine("a", site="fra-1"), machine("b", site="fra-1")))
    assert result.landing.where == "Ethernet, site fra-1"


def test_a_gang_never_spans_sites() -> None:
    """Two machines in two sites cannot hold a 16-GPU gang; the reason counts the sites."""
    snap = snapshot(machine("a", site="fra-1"), machine("b", site="ams-1"))
    result = pending(SIXTEEN, snap)
    text = (
        "no single site can hold the whole run; it would span 2 sites (networks), "
        "the largest, fra-1, has room for 8 of 16 GPUs"
    )
    assert [node.reasons for node in result.explanation.nodes] == [[text], [text]]
    assert result.headline == text
    assert result.explanation.closest is None
    assert result.wanted_machines == ()


def test_least_room_left_free_wins_on_a_rung() -> None:
    """A small gang takes the NVLink domain it fills, not the one a large run needs."""
    big = [nvl(f"big-{i}", "nvl-big") for i in range(4)]
    small = [nvl(f"small-{i}", "nvl-small") for i in range(2)]
    result = placed(SIXTEEN, snapshot(*big, *small))
    assert result.nvlink_domain == "nvl-small"


def test_interconnect_infiniband_waits_when_no_fabric_has_room() -> None:
    """With `interconnect: infiniband` and no fabric with room, the run says so."""
    ask = {"gpu_requests": {"count": 16}, "network": {"interconnect": "infiniband"}}
    snap = snapshot(ib("a", "ib-0"), ib("b", "ib-1"))
    result = pending(ask, snap)
    assert result.explanation.nodes[0].reasons == [
        "no InfiniBand fabric has room for the whole run"
    ]


def test_keep_within_rack_needs_rack_labels() -> None:
    """`keep_within: rack` on unlabelled machines gives the guide's rack text as headline."""
    ask = {"gpu_requests": {"count": 16}, "topology": {"keep_within": "rack"}}
    result = pending(ask, snapshot(machine("a"), machine("b")))
    assert result.headline == "no rack set on this machine (topology.astraeus.io/rack)"


def test_keep_within_rack_holds_the_gang_in_one_rack() -> None:
    """`keep_within: rack` never takes machines of two racks, even in one fabric."""
    ask = {"gpu_requests": {"count": 16}, "topology": {"keep_within": "rack"}}
    snap = snapshot(ib("a", "ib-0", rack="r1"), ib("b", "ib-0", rack="r2"))
    result = pending(ask, snap)
    assert result.explanation.nodes[0].reasons == ["no rack has room for the whole run"]


def test_spread_rack_puts_one_worker_per_rack() -> None:
    """`spread: rack` picks machines in distinct racks."""
    ask = {"gpu_requests": {"count": 16}, "topology": {"spread": "rack"}}
    snap = snapshot(machine("a", rack="r1"), machine("b", rack="r1"), machine("c", rack="r2"))
    assert placed(ask, snap).landing.machines == ["a", "c"]


def test_min_gbps_ignores_slow_ports() -> None:
    """Ports below `min_gbps` do not count: a machine with only slow ports is filtered."""
    ask = {"gpu_requests": {"count": 16}, "network": {"min_gbps": 400}}
    snap = snapshot(
        machine("a", ports=[rdma_port(gbps=400)], fabric="ib-0"),
        machine("b", ports=[rdma_port(gbps=100)], fabric="ib-0"),
    )
    result = pending(ask, snap)
    assert result.explanation.nodes[1].reasons == ["no RDMA port up at 400 Gb/s or faster"]


def test_patience_waits_for_a_tighter_rung_that_could_free_up() -> None:
    """With patience left, a run that fits only over Ethernet waits for a busy NVLink domain."""
    busy = [nvl(f"n{i}", "nvl-1", used_gpus=range(8)) for i in range(2)]
    snap = snapshot(*busy, machine("e1"), machine("e2"))
    ask = {"gpu_requests": {"count": 16}, "topology": {"patience_seconds": 1800}}
    started = NOW - timedelta(seconds=600)
    result = pending(ask, snap, first_evaluated_at=started)
    assert result.patience_remaining_seconds == 1200
    assert result.headline == (
        "waits up to 1200 s more for one NVLink domain (topology.patience_seconds)"
    )
    assert result.kind == ReasonKind.WAITS_FOR_NETWORK
    assert result.wanted_machines == ("n0", "n1")
    late = place(run(ask=ask, first_evaluated_at=NOW - timedelta(seconds=1800)), snap, NOW)
    assert isinstance(late, Placement)
    assert late.landing.rung == "ethernet"


def test_an_unknown_site_is_its_own_site() -> None:
    """Machines with no site at all still never mix with machines of a named site."""
    snap = snapshot(machine("a"), machine("b", site="fra-1"))
    result = pending(SIXTEEN, snap)
    text = (
        "no single site can hold the whole run; it would span 2 sites (networks), the largest, "
        "fra-1, has room for 8 of 16 GPUs"
    )
    assert result.headline == text
    assert [(node.name, node.reasons) for node in result.explanation.nodes] == [
        ("a", [text]),
        ("b", [text]),
    ]


def test_report_labels_name_the_site_when_the_view_does_not() -> None:
    """The `topology.astraeus.io/site` label is the site when the view carries none."""
    view = machine("a", labels_={"topology.astraeus.io/site": "fra-1"})
    assert isinstance(view.report, MachineReport)
    result = placed(SIXTEEN, snapshot(view, machine("b", site="fra-1")))
    assert result.landing.where == "Ethernet, site fra-1"
