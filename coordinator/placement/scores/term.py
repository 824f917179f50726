"""What every score term looks at: one machine, one worker, and what is near it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from ..fabrics import NetworkPlace
from ..facts import Free, MachineFacts
from ..needs import Needs, WorkerAsk


@dataclass(frozen=True)
class Home:
    """A machine that holds a drive on its own disks, as seen from where the drive is read."""

    site: str
    rack: str | None
    fabric: str | None
    nvlink_domain: str | None
    rdma: bool


@dataclass(frozen=True)
class ScoreInput:
    """One worker on one machine: the machine before placing it, and what the worker takes."""

    needs: Needs
    facts: MachineFacts
    free: Free
    worker: WorkerAsk
    place: NetworkPlace
    now: datetime
    at_risk_taken: int = 0
    rdma_work: bool = False
    """The run is placed on RDMA (it asks for it, or lands on an RDMA rung)."""
    drive_homes: Mapping[str, Sequence[Home]] | None = None
    """For each drive the run mounts, the machines that hold it."""
