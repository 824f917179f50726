"""The scheduler's one garbage-collector policy, for the service's loop and the pass worker alike.

What lives on between passes (every machine's report and record, the engine's live state) is
millions of objects at 5,000 machines. Left in the collector's sight, its full collections walk
all of it every few seconds under load, and every request waits hundreds of milliseconds.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass

UNFREEZE_EVERY = 100
"""Passes between handing the frozen objects back to the garbage collector."""


@dataclass
class GcPolicy:
    """One process's count of passes settled. The service's loop settles after each pass; the
    pass worker once its live state is current (built, not before), before it decides."""

    passes: int = 0

    def settle(self) -> None:
        """Move what lives now out of the collector's sight (`gc.freeze`). Every
        `UNFREEZE_EVERY` passes it is all handed back, collected at once (`gc.collect`), and
        what still lives frozen again.

        The collection is the choice: unfrozen objects only join the oldest generation, whose
        next full collection may not come before the next pass freezes them again, so a cycle
        among objects frozen while alive could stay for good. Collecting right away frees every
        such cycle, at the cost of one full collection per `UNFREEZE_EVERY` passes (at 5,000
        machines, ~0.5 M tracked objects: 1.1-2.0 s on a loaded two-core machine, the 100-450 ms
        of `startup.settle_loaded` on a quiet one); in the service it holds up requests that
        long, once."""
        self.passes += 1
        if self.passes % UNFREEZE_EVERY == 0:
            gc.unfreeze()
            gc.collect()
        gc.freeze()
