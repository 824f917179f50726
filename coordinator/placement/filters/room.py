"""The `room` filter: free cores, then free memory, for the smallest worker the run could put
here."""

from __future__ import annotations

from typing import Final

from astraeus.shared.reasons import RejectionCode

from ..rejection import Rejection
from ..units import gib, number
from .check import Check, Reads

NAME: Final = "room"
READS: Final = Reads.FREE


def insufficient_cpu(need: float, free: float) -> str:
    return f"insufficient cpu: need {number(need)}, {number(free)} free"


def insufficient_memory(need: int, free: int) -> str:
    return f"insufficient memory: need {gib(need)}, {gib(free)} free"


def check(c: Check) -> Rejection | None:
    report, worker, free = c.facts.report, c.worker, c.free
    if report is None:
        return None
    if worker.cpu_cores > free.cpu_cores:
        room = worker.cpu_cores <= report.cpu_cores
        text = insufficient_cpu(worker.cpu_cores, free.cpu_cores)
        return Rejection(
            filter=NAME,
            reason=text,
            room=room,
            need=worker.cpu_cores,
            have=free.cpu_cores,
            code=RejectionCode.INSUFFICIENT_CPU,
        )
    if worker.memory_bytes > free.memory_bytes:
        room = worker.memory_bytes <= report.memory_bytes
        text = insufficient_memory(worker.memory_bytes, free.memory_bytes)
        return Rejection(
            filter=NAME,
            reason=text,
            room=room,
            need=worker.memory_bytes,
            have=free.memory_bytes,
            code=RejectionCode.INSUFFICIENT_MEMORY,
        )
    return None
