"""The placement engine: a pure function of (run, cluster snapshot, now).

`place` decides one run; a `PlacementSession` decides many over one snapshot (one scheduler
pass), and `score_breakdown` shows a machine's score term by term.
"""

from .breakdown import score_breakdown
from .engine import place
from .model import (
    ClusterSnapshot,
    MachineSnapshot,
    Pending,
    Placement,
    PlacementResult,
    Reservation,
    RunRequest,
    WorkerPlacement,
)
from .rejection import Rejection
from .session import PlacementSession

__all__ = [
    "ClusterSnapshot",
    "MachineSnapshot",
    "Pending",
    "Placement",
    "PlacementResult",
    "PlacementSession",
    "Rejection",
    "Reservation",
    "RunRequest",
    "WorkerPlacement",
    "place",
    "score_breakdown",
]
