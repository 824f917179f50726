"""Rung 2 is "one multi-node NVLink domain ... with its IMEX channel": a machine whose IMEX
channel is not available is in no domain for a run of several machines (its worker would fail
with `IMEX channel is not available on this machine`), and still takes a run alone."""

from datetime import UTC, datetime
from typing import Any

from astraeus.coordinator.placement import (
    ClusterSnapshot,
    MachineSnapshot,
    Pending,
    Placement,
    place,
)
from astraeus.coordinator.testing.fake_cluster import gpus, machine, rdma_port, run, snapshot
from astraeus.shared import NetworkKind
from astraeus.shared.reasons import ReasonKind, RejectionCode

NOW = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
GB200 = "NVIDIA GB200"
NO_IMEX = "IMEX channel is not available on this machine"
EIGHT = {"gpu_requests": {"count": 8}}


def tray(name: str, domain: str, *, imex: bool, **fields: Any) -> MachineSnapshot:
    """A GB200 NVL72 compute tray: 4 GPUs in the rack's NVLink domain."""
    found = gpus(name, 4, model=GB200, memory_gib=186, nvlink_domain=domain)
    return machine(name, gpu_list=found, imex=imex, **fields)


def placed(ask: dict[str, Any], snap: ClusterSnapshot) -> Placement:
    result = place(run(ask=ask), snap, NOW)
    assert isinstance(result, Placement), result
    return result


def pending(ask: dict[str, Any], snap: ClusterSnapshot) -> Pending:
    result = place(run(ask=ask), snap, NOW)
    assert isinstance(result, Pending), result
    return result


def test_a_domain_with_its_imex_channel_is_rung_two() -> None:
    """The control: two trays of one domain with IMEX hold an 8-GPU gang on rung 2."""
    snap = snapshot(tray("t1", "nvl-1", imex=True), tray("t2", "nvl-1", imex=True))
    result = placed(EIGHT, snap)
    assert (result.landing.rung, result.network) == ("nvlink_domain", NetworkKind.NVLINK)
    assert result.nvlink_domain == "nvl-1"


def test_a_domain_without_imex_sends_the_gang_to_a_lower_rung() -> None:
    """Two trays of one domain without IMEX: the 8-GPU gang goes to their InfiniBand fabric
    (or Ethernet without one), never to the domain."""
    ports = [rdma_port()]
    snap = snapshot(
        tray("t1", "nvl-1", imex=False, ports=ports, fabric="ib-0"),
        tray("t2", "nvl-1", imex=False, ports=ports, fabric="ib-0"),
    )
    result = placed(EIGHT, snap)
    assert (result.landing.rung, result.network) == ("fabric", NetworkKind.INFINIBAND)
    assert result.nvlink_domain is None
    assert result.shape.why == "2 machines × 4 GPUs on InfiniBand fabric ib-0"
    snap = snapshot(tray("t1", "nvl-1", imex=False), tray("t2", "nvl-1", imex=False))
    result = placed(EIGHT, snap)
    assert (result.landing.rung, result.network) == ("ethernet", NetworkKind.ETHERNET)
    assert result.nvlink_domain is None


def test_only_the_machines_with_imex_form_the_domain() -> None:
    """In a domain where one tray lacks IMEX, a gang that needs all three trays leaves the
    domain; one that fits the two with IMEX takes exactly them."""
    snap = snapshot(
        tray("t1", "nvl-1", imex=True),
        tray("t2", "nvl-1", imex=False),
        tray("t3", "nvl-1", imex=True),
    )
    result = placed(EIGHT, snap)
    assert result.landing.rung == "nvlink_domain"
    assert result.landing.machines == ["t1", "t3"]
    result = placed({"gpu_requests": {"count": 12}}, snap)
    assert (result.landing.rung, result.network) == ("ethernet", NetworkKind.ETHERNET)


def test_keep_within_nvlink_domain_waits_naming_imex() -> None:
    """A run that must stay in one NVLink domain waits, every tray saying it lacks IMEX."""
    ask = {**EIGHT, "topology": {"keep_within": "nvlink_domain"}}
    snap = snapshot(tray("t1", "nvl-1", imex=False), tray("t2", "nvl-1", imex=False))
    result = pending(ask, snap)
    assert [node.reasons for node in result.explanation.nodes] == [[NO_IMEX], [NO_IMEX]]
    assert (result.headline, result.kind) == (NO_IMEX, ReasonKind.SAME_REASON)
    assert result.explanation.closest is None
    assert result.wanted_machines == ()
    assert [group.code for group in result.rejections] == [RejectionCode.NO_IMEX_CHANNEL]
    assert [group.room for group in result.rejections] == [False]


def test_interconnect_nvlink_waits_naming_imex() -> None:
    """`interconnect: nvlink` allows rungs 1 and 2 only: without IMEX the gang waits."""
    ask = {**EIGHT, "network": {"interconnect": "nvlink"}}
    snap = snapshot(tray("t1", "nvl-1", imex=False), tray("t2", "nvl-1", imex=False))
    result = pending(ask, snap)
    assert [node.reasons for node in result.explanation.nodes] == [[NO_IMEX], [NO_IMEX]]
    assert result.headline == NO_IMEX


def test_one_machine_needs_no_imex() -> None:
    """A run that fits one tray lands there (rung 1, no IMEX channel given), rules or not."""
    snap = snapshot(tray("t1", "nvl-1", imex=False), tray("t2", "nvl-1", imex=False))
    keep = {"topology": {"keep_within": "nvlink_domain"}}
    for rules in (keep, {"network": {"interconnect": "nvlink"}}):
        result = placed({"gpu_requests": {"count": 4}, **rules}, snap)
        assert (result.landing.rung, result.network) == ("node", NetworkKind.LOCAL)


def test_each_machine_says_what_keeps_it_out_of_a_domain() -> None:
    """Trays without IMEX name it; a busy domain with IMEX is short on room, and is closest."""
    ask = {**EIGHT, "machines": 2, "topology": {"keep_within": "nvlink_domain"}}
    snap = snapshot(
        tray("a1", "nvl-a", imex=False),
        tray("a2", "nvl-a", imex=False),
        tray("b1", "nvl-b", imex=True),
        tray("b2", "nvl-b", imex=True, used_gpus=range(4)),
    )
    result = pending(ask, snap)
    reasons = {node.name: node.reasons for node in result.explanation.nodes}
    assert reasons == {
        "a1": [NO_IMEX],
        "a2": [NO_IMEX],
        "b1": ["no NVLink domain has room for the whole run"],
        "b2": ["insufficient gpus: need 4, 0 free and usable"],
    }
    assert result.explanation.closest == "b1"
    assert result.wanted_machines == ("b1", "b2")


def test_a_machine_that_could_take_the_run_alone_waits_for_room_not_imex() -> None:
    """Without IMEX, an 8-GPU machine still takes an 8-GPU run alone once its GPUs are free:
    while they are held, it is short on room, not on IMEX."""
    ask = {**EIGHT, "topology": {"keep_within": "nvlink_domain"}}
    busy = [
        machine(name, gpu_list=gpus(name, 8, nvlink_domain="nvl-1"), imex=False, used_gpus=range(4))
        for name in ("g1", "g2")
    ]
    result = pending(ask, snapshot(*busy))
    assert [node.reasons for node in result.explanation.nodes] == [
        ["no NVLink domain has room for the whole run"],
        ["no NVLink domain has room for the whole run"],
    ]
    assert result.kind == ReasonKind.NO_MACHINE_FITS
    assert result.explanation.closest == "g1"
    assert [group.room for group in result.rejections] == [True]
