"""The `spread` filter: no other worker of the run already here, when workers must not share
(every mode but `Any`, and `Any` under a one-worker-per-machine rule). Each array element is its
own task: the rule applies per element, so other elements of the run never keep one out."""

from __future__ import annotations

from typing import Final

from astraeus.shared.reasons import RejectionCode

from ..rejection import Rejection
from .check import Check, Reads

NAME: Final = "spread"
READS: Final = Reads.RUN
ALREADY_HERE: Final = "a worker of this run is already on this machine"


def check(c: Check) -> Rejection | None:
    if not c.needs.must_not_share:
        return None
    if c.needs.run.key in c.free.workers:
        return Rejection(filter=NAME, reason=ALREADY_HERE, code=RejectionCode.WORKER_ALREADY_HERE)
    return None
