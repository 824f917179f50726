"""The `topology` filter: topology rules. Per machine: it has the rack, fabric or NVLink domain a
rule needs. For the whole gang (see `gang`): some group of machines holds the run without breaking a
rule."""

from __future__ import annotations

from typing import Final

from astraeus.shared import Interconnect, KeepWithin, Spread, labels, reasons
from astraeus.shared.reasons import RejectionCode

from ..needs import Needs
from ..rejection import Rejection
from .check import Check, Reads

NAME: Final = "topology"
READS: Final = Reads.MACHINE


NO_FABRIC: Final = f"no fabric known for this machine ({labels.FABRIC}, or an InfiniBand subnet)"
NO_NVLINK_DOMAIN: Final = "machine is in no NVLink domain"
NO_IMEX: Final = "IMEX channel is not available on this machine"
"""A machine of an NVLink domain whose agent cannot give a worker IMEX channel 0: the agent's own
words when it refuses such a worker (`agent/environment.py`)."""

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


def no_room(need: int, free: int, machines: int) -> str:
    """The machines that pass every filter have too few GPUs between them."""
    return (
        f"the whole run does not fit: need {need} GPUs, "
        f"{free} free and usable on {_count(machines, 'machine')}"
    )


def too_few_in_workspace(have: int, need: int) -> str:
    """The workspace's machines, all of them and idle, have fewer GPUs of the kind asked than
    the run asks for: no shape and no wait makes it fit."""
    gpus = "1 GPU that matches" if have == 1 else f"{have} GPUs that match"
    return f"the workspace's machines have {gpus}; the run asks for {need}"


def too_few_machines(need: int, gpus_each: int, have: int) -> str:
    """Workers never share a machine, and too few machines have room for one."""
    worker = f"a {gpus_each}-GPU worker" if gpus_each else "a worker"
    return (
        f"the whole run does not fit: need {need} machines with room for {worker}, "
        f"{have} {'has' if have == 1 else 'have'} it"
    )


def too_few_workers(need: int, gpus_each: int, held: int, machines: int) -> str:
    """Workers may share machines, and the machines have room for too few of them."""
    workers = f"{need} workers of {gpus_each} GPUs" if gpus_each else f"{need} workers"
    return (
        f"the whole run does not fit: need room for {workers}, "
        f"{_count(machines, 'machine')} {'has' if machines == 1 else 'have'} room for {held}"
    )


def too_few_domains(spread: Spread, need: int, gpus_each: int, have: int) -> str:
    """`topology.spread` wants one worker per rack or fabric, and too few have room for one."""
    worker = f"a {gpus_each}-GPU worker" if gpus_each else "a worker"
    domain = {Spread.RACK: "racks", Spread.FABRIC: "fabrics"}.get(spread, "machines")
    return (
        f"the whole run does not fit: need {need} {domain} with room for {worker} "
        f"(topology.spread: {spread.value}), {have} {'has' if have == 1 else 'have'} it"
    )


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("s" if number != 1 else "")


def no_even_split(gpus: int) -> str:
    """No shape meets `machines`, `min_nodes`/`max_nodes`, `min_per_machine` and `policy`."""
    return f"Cannot plan workers: no even split of {gpus} gpus meets the run's rules"


def wants_domain(needs: Needs) -> bool:
    """The run never leaves one NVLink domain (`keep_within`), or its workers talk over NVLink."""
    keep, interconnect = needs.keep_within, needs.interconnect
    return keep is KeepWithin.NVLINK_DOMAIN or interconnect is Interconnect.NVLINK


def no_imex() -> Rejection:
    """For the whole gang: the machine's domain holds no run of several machines here."""
    return Rejection(filter=NAME, reason=NO_IMEX, code=RejectionCode.NO_IMEX_CHANNEL)


def check(c: Check) -> Rejection | None:
    needs, facts = c.needs, c.facts
    if (needs.keep_within is KeepWithin.RACK or needs.spread is Spread.RACK) and not facts.rack:
        return Rejection(
            filter=NAME, reason=reasons.NO_RACK_LABEL, code=RejectionCode.NO_RACK_LABEL
        )
    wants_fabric = needs.keep_within is KeepWithin.FABRIC or needs.spread is Spread.FABRIC
    if wants_fabric and not c.place.fabric:
        return Rejection(filter=NAME, reason=NO_FABRIC, code=RejectionCode.NO_FABRIC)
    if wants_domain(needs) and not facts.nvlink_domain:
        return Rejection(filter=NAME, reason=NO_NVLINK_DOMAIN, code=RejectionCode.NO_NVLINK_DOMAIN)
    return None
