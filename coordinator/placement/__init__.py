"""The placement engine: a pure function of (run, cluster snapshot, now).

Inputs and outputs are in `model`; the engine itself arrives with the placement issue.
"""

from .model import (
    ClusterSnapshot,
    MachineView,
    Pending,
    Placement,
    PlacementResult,
    Reservation,
    RunRequest,
    WorkerPlacement,
)

__all__ = [
    "ClusterSnapshot",
    "MachineView",
    "Pending",
    "Placement",
    "PlacementResult",
    "Reservation",
    "RunRequest",
    "WorkerPlacement",
]
