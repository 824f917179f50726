"""What every filter looks at: one machine, what is free on it, and the run's smallest worker."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .. import gpu_match
from ..fabrics import NetworkPlace
from ..facts import Free, MachineFacts
from ..needs import Needs, WorkerAsk


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
