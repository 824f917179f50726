"""The `drives` filter: they exist, are reachable from the machine, and fit at its data location."""

from __future__ import annotations

from typing import Final

from astraeus.shared.reasons import RejectionCode
from astraeus.shared.sizes import size_text

from ..rejection import Rejection
from .check import Check, Reads

NAME: Final = "drives"
READS: Final = Reads.MACHINE


def no_such_drive(name: str) -> str:
    return f"drive {name} does not exist"


def unreachable(name: str) -> str:
    return f"drive {name} is not reachable from this machine"


def no_data_room(need: int, free: int) -> str:
    """Sizes in the unit they reach (`90.9 TiB`): drives and data disks run to petabytes."""
    return f"drives need {size_text(need)} at the data location, {size_text(free)} free"


def check(c: Check) -> Rejection | None:
    drives = c.needs.drive_names
    if not drives:
        return None
    for drive in drives:
        if drive not in c.known_drives:
            return Rejection(
                filter=NAME, reason=no_such_drive(drive), code=RejectionCode.NO_SUCH_DRIVE
            )
        if drive not in c.facts.reachable_drives:
            return Rejection(
                filter=NAME, reason=unreachable(drive), code=RejectionCode.DRIVE_UNREACHABLE
            )
    report = c.facts.report
    free = report.data_free_bytes if report else None
    need = c.needs.drive_bytes
    if free is not None and need > free:
        return Rejection(
            filter=NAME, reason=no_data_room(need, free), code=RejectionCode.NO_DATA_ROOM
        )
    return None
