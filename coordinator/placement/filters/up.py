"""The `up` filter: up and reporting capacity; not under memory or disk pressure."""

from __future__ import annotations

from typing import Final

from astraeus.shared import PressureCondition, reasons
from astraeus.shared.reasons import RejectionCode

from ..rejection import Rejection
from .check import Check, Reads

NAME: Final = "up"
READS: Final = Reads.MACHINE
DOWN: Final = "machine is down"
NEVER_REPORTED: Final = "machine has not reported"
NO_CAPACITY: Final = "machine reports no cores or memory"
PRESSURES: Final = (PressureCondition.MEMORY, PressureCondition.DISK)


def check(c: Check) -> Rejection | None:
    report = c.facts.report
    if report is None:
        return Rejection(filter=NAME, reason=NEVER_REPORTED, code=RejectionCode.NEVER_REPORTED)
    if not c.facts.up:
        return Rejection(filter=NAME, reason=DOWN, code=RejectionCode.MACHINE_DOWN)
    if report.cpu_cores <= 0 or report.memory_bytes <= 0:
        return Rejection(filter=NAME, reason=NO_CAPACITY, code=RejectionCode.NO_CAPACITY)
    for condition in PRESSURES:
        if condition in report.conditions:
            return Rejection(
                filter=NAME,
                reason=reasons.under_pressure(condition.value),
                code=RejectionCode.UNDER_PRESSURE,
            )
    return None
