"""The `rdma` filter: RDMA ports up (and fast enough), when the network asks for RDMA."""

from __future__ import annotations

from typing import Final

from astraeus.shared import LinkLayer
from astraeus.shared.reasons import RejectionCode

from ..rejection import Rejection
from ..units import number
from .check import Check, Reads

NAME: Final = "rdma"
READS: Final = Reads.MACHINE


def no_port(infiniband: bool, min_gbps: float | None) -> str:
    """`no RDMA port up`, `no InfiniBand port up at 400 Gb/s or faster`."""
    kind = "InfiniBand" if infiniband else "RDMA"
    speed = f" at {number(min_gbps)} Gb/s or faster" if min_gbps else ""
    return f"no {kind} port up{speed}"


def check(c: Check) -> Rejection | None:
    needs = c.needs
    if not needs.asks_rdma:
        return None
    link = c.place.link
    if link is None or (needs.link is LinkLayer.INFINIBAND and link is not LinkLayer.INFINIBAND):
        return Rejection(
            filter=NAME,
            reason=no_port(needs.link is LinkLayer.INFINIBAND, needs.min_gbps),
            code=RejectionCode.NO_RDMA_PORT,
        )
    return None
