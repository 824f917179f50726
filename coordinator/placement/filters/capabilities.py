"""The `capabilities` filter: capabilities the run needs. A run with an image needs `container`; a
Mac does not report it, so it runs only its native engines."""

from __future__ import annotations

from typing import Final

from astraeus.shared import Capability
from astraeus.shared.reasons import RejectionCode

from ..rejection import Rejection
from .check import Check, Reads

NAME: Final = "capabilities"
READS: Final = Reads.MACHINE


def lacks_capability(capability: str) -> str:
    return f"machine lacks capability {capability}"


def needed(c: Check) -> list[str]:
    wanted = [capability.value for capability in c.needs.ask.capabilities]
    if c.needs.has_image:
        wanted.insert(0, Capability.CONTAINER.value)
    return wanted


def check(c: Check) -> Rejection | None:
    report = c.facts.report
    have = set(report.capabilities) if report else set()
    for capability in needed(c):
        if capability not in have:
            code = (
                RejectionCode.NO_CONTAINER_RUNTIME
                if capability == Capability.CONTAINER
                else RejectionCode.LACKS_CAPABILITY
            )
            return Rejection(filter=NAME, reason=lacks_capability(capability), code=code)
    return None
