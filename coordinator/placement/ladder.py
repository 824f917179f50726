"""The topology ladder, as data: the scheduler climbs down and stops at the first rung where the
whole run fits. Every group also stays in one site, and within a `keep_within` boundary."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from astraeus.shared import Interconnect, KeepWithin, LinkLayer, NetworkKind

from .needs import Needs

Key = tuple[str, ...]


@dataclass(frozen=True)
class Member:
    """One machine as the ladder sees it, for one run."""

    name: str
    site: str
    rack: str | None
    fabric: str | None
    link: LinkLayer | None
    nvlink_domain: str | None
    imex: bool
    """IMEX channel 0 is available: the machine counts in its NVLink domain for a group."""


def _node(m: Member) -> Key | None:
    return (m.name,)


def shared_domain(m: Member) -> str | None:
    """The NVLink domain a machine shares with others: only with its IMEX channel, which every
    worker placed in a multi-node domain is given (the agent fails one without it). A machine
    without it is in no domain for a group of machines; alone (rung 1) it needs none."""
    return m.nvlink_domain if m.imex else None


def _nvlink(m: Member) -> Key | None:
    domain = shared_domain(m)
    return (domain,) if domain else None


def _fabric_rack(m: Member) -> Key | None:
    return (m.fabric, m.link.value, m.rack) if m.fabric and m.link and m.rack else None


def _fabric(m: Member) -> Key | None:
    return (m.fabric, m.link.value) if m.fabric and m.link else None


def _rdma_rack(m: Member) -> Key | None:
    return (m.link.value, m.rack) if m.link and not m.fabric and m.rack else None


def _rdma(m: Member) -> Key | None:
    return (m.link.value,) if m.link and not m.fabric else None


def _rack(m: Member) -> Key | None:
    return (m.rack,) if m.rack else None


def _anywhere(m: Member) -> Key | None:
    return ()


Where = Callable[[Member], tuple[str, str]]
"""A group's landing `where` and the shape's `why` tail, named from one of its machines."""


def _link(m: Member) -> str:
    return "InfiniBand" if m.link is LinkLayer.INFINIBAND else "RoCE"


def _site(m: Member) -> str:
    return f" in site {m.site}" if m.site else ""


def _where_node(m: Member) -> tuple[str, str]:
    return f"one machine, {m.name}", f"on {m.name}"


def _where_nvlink(m: Member) -> tuple[str, str]:
    return f"one NVLink domain, {m.nvlink_domain}", f"in NVLink domain {m.nvlink_domain}"


def _where_fabric_rack(m: Member) -> tuple[str, str]:
    return (
        f"one {_link(m)} fabric and one rack, {m.fabric} and {m.rack}",
        f"on {_link(m)} fabric {m.fabric} in rack {m.rack}",
    )


def _where_fabric(m: Member) -> tuple[str, str]:
    return f"one {_link(m)} fabric, {m.fabric}", f"on {_link(m)} fabric {m.fabric}"


def _where_rdma_rack(m: Member) -> tuple[str, str]:
    return f"RDMA in one rack, {m.rack}", f"over RDMA ({_link(m)}) in rack {m.rack}"


def _where_rdma(m: Member) -> tuple[str, str]:
    return f"RDMA, {_link(m)}{_site(m)}", f"over RDMA ({_link(m)}){_site(m)}"


def _where_rack(m: Member) -> tuple[str, str]:
    return f"one rack over Ethernet, {m.rack}", f"over Ethernet in rack {m.rack}"


def _where_anywhere(m: Member) -> tuple[str, str]:
    return f"Ethernet{', site ' + m.site if m.site else ''}", f"over Ethernet{_site(m)}"


@dataclass(frozen=True)
class Rung:
    name: str
    """Stable id, written to the run's `landing.rung`."""
    title: str
    """`one InfiniBand fabric`: how "Asked and got" names it."""
    key: Callable[[Member], Key | None]
    network: NetworkKind
    where: Where
    """The landing's `where` and the shape's `why` tail for one of its groups."""
    single: bool = False
    """Holds one machine only."""
    fabric: bool = False
    """Groups are fabrics (InfiniBand, or RoCE, which lands as RDMA): a run asking one link
    layer takes only fabrics of it."""
    rdma: bool = False
    """Workers talk over RDMA here: scores count RDMA ports at risk."""
    nvlink: bool = False
    """Groups are NVLink domains: the placement names its domain."""


RUNGS: tuple[Rung, ...] = (
    Rung("node", "one machine", _node, NetworkKind.LOCAL, _where_node, single=True),
    Rung(
        "nvlink_domain",
        "one NVLink domain",
        _nvlink,
        NetworkKind.NVLINK,
        _where_nvlink,
        nvlink=True,
    ),
    Rung(
        "fabric_rack",
        "one InfiniBand fabric and one rack",
        _fabric_rack,
        NetworkKind.INFINIBAND,
        _where_fabric_rack,
        fabric=True,
        rdma=True,
    ),
    Rung(
        "fabric",
        "one InfiniBand fabric",
        _fabric,
        NetworkKind.INFINIBAND,
        _where_fabric,
        fabric=True,
        rdma=True,
    ),
    Rung(
        "rdma_rack",
        "RDMA in one rack",
        _rdma_rack,
        NetworkKind.RDMA,
        _where_rdma_rack,
        rdma=True,
    ),
    Rung("rdma", "RDMA", _rdma, NetworkKind.RDMA, _where_rdma, rdma=True),
    Rung("rack", "one rack over Ethernet", _rack, NetworkKind.ETHERNET, _where_rack),
    Rung("ethernet", "Ethernet", _anywhere, NetworkKind.ETHERNET, _where_anywhere),
)

_LAST_RUNG = {
    Interconnect.AUTO: "ethernet",
    Interconnect.RDMA: "rdma",
    Interconnect.INFINIBAND: "fabric",
    Interconnect.NVLINK: "nvlink_domain",
}


def allowed_rungs(needs: Needs) -> tuple[Rung, ...]:
    """The rungs the run's rules allow, tightest first."""
    if needs.keep_within is KeepWithin.NODE:
        return RUNGS[:1]
    last = _LAST_RUNG[needs.interconnect]
    if needs.asks_rdma and last == "ethernet":
        last = "rdma"
    names = [rung.name for rung in RUNGS]
    allowed = RUNGS[: names.index(last) + 1]
    if ethernet_will_do(needs):
        return tuple(rung for rung in allowed if not (rung.nvlink or rung.rdma))
    return allowed


def ethernet_will_do(needs: Needs) -> bool:
    """A run without GPUs that asks for no interconnect (nor an RDMA port speed) and no rule
    naming an NVLink domain or fabric: its workers gain nothing from NVLink or RDMA, so it climbs
    rungs 1, 7 and 8 only, rather than take GPU machines for rungs 2-6 while CPU machines are
    free (the -30 score for a CPU worker on a GPU machine counts only within a rung)."""
    return (
        needs.gpus == 0
        and needs.interconnect is Interconnect.AUTO
        and not needs.asks_rdma
        and needs.keep_within not in (KeepWithin.NVLINK_DOMAIN, KeepWithin.FABRIC)
    )


def group_key(rung: Rung, needs: Needs, m: Member) -> Key | None:
    """The group a machine belongs to on a rung: one site, the `keep_within` boundary, the rung's
    own key; None when the machine is not on that rung."""
    own = rung.key(m)
    if own is None:
        return None
    wrong_link = needs.link is not None and m.link is not needs.link
    if rung.fabric and wrong_link:
        return None
    keep = _keep(needs.keep_within, m)
    if keep is None:
        return None
    return (m.site, *keep, *own)


def _keep(keep_within: KeepWithin | None, m: Member) -> Key | None:
    if keep_within is None or keep_within is KeepWithin.NODE:
        return ()
    value = {
        KeepWithin.NVLINK_DOMAIN: shared_domain(m),
        KeepWithin.FABRIC: m.fabric,
        KeepWithin.RACK: m.rack,
    }[keep_within]
    return (value,) if value else None


def network(rung: Rung, m: Member) -> NetworkKind:
    """The network a group lands on; a RoCE fabric is RDMA, not InfiniBand."""
    if rung.fabric and m.link is LinkLayer.ETHERNET:
        return NetworkKind.RDMA
    return rung.network


def where(rung: Rung, m: Member) -> tuple[str, str]:
    """(landing `where`, the shape's `why` tail) for a group, named from one of its machines."""
    return rung.where(m)
