"""The `selection` filter: the run's selection: `names`, `match_labels`, and the workspace's
pools."""

from __future__ import annotations

from typing import Final

from astraeus.shared import labels, reasons
from astraeus.shared.reasons import RejectionCode

from ..rejection import Rejection
from .check import Check, Reads

NAME: Final = "selection"
READS: Final = Reads.MACHINE
NOT_NAMED: Final = "machine is not among the run's names"


def in_no_pool(pools: tuple[str, ...]) -> str:
    """One pool reads as the guide's `machine lacks label pool=h100`; several list them all."""
    if len(pools) == 1:
        return reasons.lacks_label(labels.POOL, pools[0])
    listed = ", ".join(f"{labels.POOL}={pool}" for pool in pools)
    return f"machine is in none of the workspace's pools: {listed}"


def check(c: Check) -> Rejection | None:
    needs, have = c.needs, c.facts.snapshot.labels
    if needs.names and c.facts.name not in needs.names:
        return Rejection(filter=NAME, reason=NOT_NAMED, code=RejectionCode.NOT_NAMED)
    for key, value in sorted(needs.match_labels.items()):
        if have.get(key) != value:
            code = RejectionCode.NOT_IN_POOL if key == labels.POOL else RejectionCode.LACKS_LABEL
            return Rejection(filter=NAME, reason=reasons.lacks_label(key, value), code=code)
    pools = needs.run.pools
    if pools and have.get(labels.POOL) not in pools:
        return Rejection(filter=NAME, reason=in_no_pool(pools), code=RejectionCode.NOT_IN_POOL)
    return None
