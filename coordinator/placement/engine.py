"""`place`: the placement engine as one pure function."""

from __future__ import annotations

from datetime import datetime

from .model import ClusterSnapshot, Pending, Placement, RunRequest
from .session import PlacementSession


def place(run: RunRequest, snapshot: ClusterSnapshot, now: datetime) -> Placement | Pending:
    """Where the run's workers go, or why it waits. Pure: no clock, no I/O, no logging; the same
    input always gives the same output."""
    return PlacementSession(snapshot).place(run, now)
