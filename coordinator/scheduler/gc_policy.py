"""The scheduler's one garbage-collector policy, for the service's loop and the pass worker alike.

What lives on between passes (every machine's report and record, the engine's live state) is
millions of objects at 5,000 machines. Left in the collector's sight, its full collections walk
all of it every few seconds under load, and every request waits hundreds of milliseconds.
"""

from __future__ import annotations

import ctypes
import gc
import sys
import typing
from collections.abc import Callable
from dataclasses import dataclass

GROWTH = 0.25
"""How much the heap (`sys.getallocatedblocks`) may grow past its size after the last full
collection before the next settle hands the frozen objects back and walks them all: CPython's
own rule for its full collections (`long_lived_pending > long_lived_total / 4`), counted in
memory because a frozen object that dies is seen by nothing cheaper."""


@dataclass
class GcPolicy:
    """One process's collections at the end of its passes. The service's loop settles after
    each pass; the pass worker once its live state is current (built, not before), before it
    decides."""

    passes: int = 0
    full: int = 0
    """Full collections so far: the frozen objects handed back, all of them walked."""
    baseline: int = 0
    """`sys.getallocatedblocks()` after the last full collection (or the first settle); 0
    before the first settle."""
    growth: float = GROWTH

    def settle(self) -> None:
        """Collect what died since the last settle, then move what lives now out of the
        collector's sight (`gc.freeze`). Once the heap has grown by `growth` since the last
        full collection, the frozen objects are handed back first (`gc.unfreeze`), so that
        collection is a full one, and what still lives is frozen again.

        The collection before each freeze is what keeps the garbage made between passes from
        being frozen: `gc.freeze` freezes garbage too, and a cycle that died since the last
        collection (a pass's futures, a request's objects, whatever they hold) would stay
        frozen, with all it held, until the next full collection. It costs little: a
        collection never walks frozen objects, only those made since the last freeze (a few
        thousand after a pass: well under a millisecond; 0.23 ms for 5,000 beside 400,000
        frozen, 3.8 ms for 50,000).

        The full collection frees cycles among objects frozen while alive (unfrozen objects
        only join the oldest generation, whose next full collection may not come before the
        next pass freezes them again). It walks everything (at 5,000 machines ~0.5 M tracked
        objects: 0.5 s of CPU, 1-5 s on a loaded two-core machine), holding up whatever waits
        on this process meanwhile: in the service every request, in the pass worker the pass
        a submission waits for. It used to come every 100 passes, whether anything had died
        or not, and was the submission tail on an idle cluster (issue 29: p99 30x the p50; the
        full collection every 100th pass found nothing). Now it comes only once frozen
        garbage (or new live data) has grown the heap by a quarter, which bounds the frozen
        garbage to a quarter of the heap after a full collection, as CPython bounds its own
        oldest generation; an idle cluster's heap does not grow, and no pass waits for a walk
        of everything."""
        self.passes += 1
        due = self.baseline > 0 and sys.getallocatedblocks() > self.baseline * (1 + self.growth)
        if due:
            gc.unfreeze()
            self.full += 1
        gc.collect()
        gc.freeze()
        if due or not self.baseline:
            self.baseline = sys.getallocatedblocks()
            give_back_freed()  # the first build's, or a full collection's, freed memory

    def failed(self) -> None:
        """A pass that failed before its settle: collect what it left (the pass worker has no
        automatic collections, `passes_only`), so passes failing one after another (a storage
        fault) leave nothing to grow."""
        gc.collect()


def passes_only() -> None:
    """For a process that does nothing but passes, each of which settles (the pass worker):
    no automatic collections. While its first pass builds every machine's record and the
    live state they walked the growing heap again and again (five full collections, 40-50 % of
    that pass's CPU at 5,000 machines: 2.5 s against 1.3-1.6 s without; seconds more on a
    loaded machine, which a submission made meanwhile waited for)."""
    gc.disable()


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, None where the C library has none (musl, macOS)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return typing.cast(Callable[[int], int], trim)


_TRIM = _malloc_trim()


def give_back_freed() -> None:
    """Hand the C heap's free pages back to the system (glibc's `malloc_trim`; nothing where
    there is none). A start reads every machine's stored texts (at 50,000 machines ~135 MB of
    report JSON and compact forms) and builds the live state: all freed once read, but the
    freed blocks lie between the ones that live on, so glibc keeps them and the process's
    resident memory counts them for its whole life. Called once what was loaded is settled
    (`startup.settle_loaded`, a process's first `GcPolicy.settle`) and after each full
    collection: a walk of the heap's free lists, milliseconds, never on a request's path."""
    if _TRIM is not None:
        _TRIM(0)
