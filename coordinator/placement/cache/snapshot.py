"""The snapshot one pass or dry run reads (the second level of the cache, see `__init__.py`):
the live state's frame, shared and never changed, and the session's own copy-on-write free
capacity and fork of the free index, which `take` changes without changing the live state; and
the session's `Prepared` per ask, reading the frame's static verdicts."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from ..facts import Free
from ..needs import Needs
from .live import LiveState
from .prepared import Prepared


class SessionCache:
    """What one `PlacementSession` reads and changes of the live state."""

    def __init__(self, live: LiveState) -> None:
        frame = live.frame
        self.frame = frame
        self.free: list[Free] = list(live.free)
        """Each machine's free capacity; shared with the live state until `take` copies it."""
        self.free_index = live.free_index.fork(frame.facts, self.free, frame.kinds)
        self._owned: set[int] = set()
        """Machines whose `Free` this session copied before changing it."""
        self._prepared: dict[tuple[object, ...], Prepared] = {}

    def take(self, i: int, gpu_ids: Iterable[str], cpu_cores: float, memory_bytes: int) -> None:
        """A worker placed on machine `i` this session: what it takes is no longer free."""
        free = self._own(i)
        free.gpu_ids.difference_update(gpu_ids)
        free.cpu_cores = max(free.cpu_cores - cpu_cores, 0)
        free.memory_bytes = max(free.memory_bytes - memory_bytes, 0)
        self.free_index.update(i)

    def _own(self, i: int) -> Free:
        """Machine `i`'s free capacity, copied first if shared with the live state."""
        if i not in self._owned:
            was = self.free[i]
            self.free[i] = Free(set(was.gpu_ids), was.cpu_cores, was.memory_bytes, was.workers)
            self._owned.add(i)
        return self.free[i]

    def prepared(self, needs: Needs, now: datetime, held: frozenset[str]) -> Prepared:
        """The run's static verdicts at `now` with `held` machines held for runs ahead: shared
        by every run of the session with the same static key (and with the frame's other
        sessions, for machines not held), each run keeping its own name, shape and sizes."""
        key = (needs.static_key, now, held)
        if key not in self._prepared:
            cluster = self.frame.cluster(needs.min_gbps)
            shared = self.frame.verdicts(needs.static_key, now)
            self._prepared[key] = Prepared(cluster, self.free, needs, now, held, shared)
        prepared = self._prepared[key]
        return prepared if prepared.needs is needs else prepared.for_needs(needs)
