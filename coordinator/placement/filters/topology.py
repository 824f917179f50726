"""Filter 9: topology rules. Per machine: it has the rack, fabric or NVLink domain a rule needs.
For the whole gang (see `gang`): some group of machines holds the run without breaking a rule."""

from __future__ import annotations

from typing import Final

from astraeus.shared import Interconnect, KeepWithin, Spread, labels, reasons

from ..rejection import Rejection
from .check import Check

NAME: Final = "topology"
NO_FABRIC: Final = f"no fabric known for this machine ({labels.FABRIC}, or an InfiniBand subnet)"
NO_NVLINK_DOMAIN: Final = "machine is in no NVLink domain"

NO_ROOM_WITHIN: Final = {
    KeepWithin.NODE: "no machine has room for the whole run",
    KeepWithin.NVLINK_DOMAIN: "no NVLink domain has room for the whole run",
    KeepWithin.FABRIC: "no fabric has room for the whole run",
    KeepWithin.RACK: "no rack has room for the whole run",
}
NO_ROOM_ON: Final = {
    Interconnect.NVLINK: "no NVLink domain has room for the whole run",
    Interconnect.INFINIBAND: reasons.NO_INFINIBAND_ROOM,
    Interconnect.RDMA: "no RDMA network has room for the whole run",
}


def no_room(need: int, free: int, machines: int, unit: str) -> str:
    """The machines that pass every filter cannot hold the whole run between them."""
    return (
        f"the whole run does not fit: need {need} {unit}, "
        f"{free} free and usable on {machines} machines"
    )


def no_even_split(gpus: int) -> str:
    """No shape meets `machines`, `min_nodes`/`max_nodes`, `min_per_machine` and `policy`."""
    return f"Cannot plan workers: no even split of {gpus} gpus meets the run's rules"


def check(c: Check) -> Rejection | None:
    needs, facts = c.needs, c.facts
    if (needs.keep_within is KeepWithin.RACK or needs.spread is Spread.RACK) and not facts.rack:
        return Rejection(NAME, reasons.NO_RACK_LABEL)
    wants_fabric = needs.keep_within is KeepWithin.FABRIC or needs.spread is Spread.FABRIC
    if wants_fabric and not c.place.fabric:
        return Rejection(NAME, NO_FABRIC)
    wants_domain = (
        needs.keep_within is KeepWithin.NVLINK_DOMAIN or needs.interconnect is Interconnect.NVLINK
    )
    if wants_domain and not facts.nvlink_domain:
        return Rejection(NAME, NO_NVLINK_DOMAIN)
    return None
