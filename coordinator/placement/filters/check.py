"""What every filter looks at: one machine, what is free on it, and the run's smallest worker."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum

from .. import gpu_match
from ..fabrics import NetworkPlace
from ..facts import Free, MachineFacts
from ..needs import Needs, WorkerAsk


class Reads(Enum):
    """What a filter reads besides the run's ask: what decides where its verdicts may be kept."""

    MACHINE = "what the machine is"
    """Its report, labels, cordon, reservations, network place, held for a run ahead: kept per
    ask for every session of the live state's generation."""
    RUN = "where the run's own workers are"
    """Not read on an idle cluster, where no worker of the run is anywhere yet."""
    FREE = "what is free now, and the worker's size"
    """Decided again for each run (each distinct set of numbers read)."""


@dataclass
class Check:
    """One machine against one run. `worker` is the smallest worker any shape would put here."""

    needs: Needs
    facts: MachineFacts
    free: Free
    worker: WorkerAsk
    now: datetime
    place: NetworkPlace
    held: bool = False
    """Held back for a run ahead in the queue."""
    known_drives: frozenset[str] = frozenset()
    """Drives some machine of the cluster holds or reaches."""
    known_supply: gpu_match.Supply | None = None
    """The machine's GPUs of the asked kind, when already counted."""

    @property
    def supply(self) -> gpu_match.Supply:
        if self.known_supply is not None:
            return self.known_supply
        found = gpu_match.matched(self.needs.gpu_requests, self.facts.gpus)
        return gpu_match.supply(found, self.free.gpu_ids)
