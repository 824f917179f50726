"""The `accepting` filter: accepting runs: not cordoned, not held for a run ahead, and, for a
machine reserved for some labels, the run selects them."""

from __future__ import annotations

from typing import Final

from astraeus.shared import reasons
from astraeus.shared.reasons import RejectionCode

from ..rejection import Rejection
from ..reserving import label_reservations, selects
from .check import Check, Reads

NAME: Final = "accepting"
READS: Final = Reads.MACHINE
HELD: Final = "held for a run ahead in the queue"


def reserved_for_labels(labels: dict[str, str]) -> str:
    selected = ", ".join(f"{key}={value}" for key, value in sorted(labels.items()))
    return f"machine is reserved for runs selecting {selected}"


def check(c: Check) -> Rejection | None:
    machine = c.facts.snapshot
    if machine.cordon_reason is not None:
        return Rejection(
            filter=NAME, reason=reasons.cordoned(machine.cordon_reason), code=RejectionCode.CORDONED
        )
    if c.held:
        # Room: it comes free for this run once the run ahead has started.
        return Rejection(
            filter=NAME, reason=HELD, room=True, need=1, have=0, code=RejectionCode.HELD_FOR_QUEUE
        )
    for reservation in label_reservations(machine.reservations, c.now):
        if not selects(c.needs, reservation.labels):
            return Rejection(
                filter=NAME,
                reason=reserved_for_labels(reservation.labels),
                code=RejectionCode.RESERVED_FOR_LABELS,
            )
    return None
