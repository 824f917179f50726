"""The `reservations` filter: machines reserved for another workspace, or soon reserved when the run
has no time limit that ends first."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

from astraeus.shared.reasons import RejectionCode

from ..model import Reservation
from ..rejection import Rejection
from ..reserving import active
from .check import Check, Reads

NAME: Final = "reservations"
READS: Final = Reads.MACHINE


def reserved_for(workspace: str, until: datetime | None) -> str:
    end = f" until {until.isoformat()}" if until else ""
    return f"machine is reserved for workspace {workspace}{end}"


def soon_reserved(workspace: str, starts_at: datetime) -> str:
    return (
        f"machine is reserved for workspace {workspace} from {starts_at.isoformat()}, "
        "and the run has no time limit that ends before then"
    )


def check(c: Check) -> Rejection | None:
    for reservation in c.facts.snapshot.reservations:
        rejection = _one(c, reservation)
        if rejection is not None:
            return rejection
    return None


def _one(c: Check, reservation: Reservation) -> Rejection | None:
    workspace = reservation.workspace
    if workspace is None or workspace == c.needs.run.workspace:
        return None
    if active(reservation, c.now):
        return Rejection(
            filter=NAME,
            reason=reserved_for(workspace, reservation.ends_at),
            code=RejectionCode.RESERVED_FOR_WORKSPACE,
        )
    starts_at = reservation.starts_at
    if starts_at is None or (reservation.ends_at is not None and reservation.ends_at <= c.now):
        return None
    limit = c.needs.run.time_limit_seconds
    if limit is not None and c.now + timedelta(seconds=limit) <= starts_at:
        return None
    return Rejection(
        filter=NAME, reason=soon_reserved(workspace, starts_at), code=RejectionCode.SOON_RESERVED
    )
