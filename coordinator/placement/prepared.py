"""Verdicts that do not depend on what is free, kept for every run of a pass with the same ask."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from . import gpu_match
from .cluster import Cluster
from .facts import Free
from .filters import EARLY, LATE, Check, first_rejection
from .needs import Needs
from .rejection import Rejection


class Prepared:
    """Filters 1–5 and 9–11 and the matching GPUs, per machine, computed on first use."""

    def __init__(
        self,
        cluster: Cluster,
        free: Sequence[Free],
        needs: Needs,
        now: datetime,
        held: frozenset[str],
    ) -> None:
        self.cluster, self._free, self.needs, self.now, self.held = cluster, free, needs, now, held
        self._early: dict[int, Rejection | None] = {}
        self._late: dict[int, Rejection | None] = {}
        self._matched: dict[int, gpu_match.Matched] = {}

    def for_needs(self, needs: Needs) -> Prepared:
        """The same verdicts for another run with the same `static_key`."""
        twin = Prepared(self.cluster, self._free, needs, self.now, self.held)
        twin._early, twin._late, twin._matched = self._early, self._late, self._matched
        return twin

    def check(self, i: int) -> Check:
        """A check for the static filters; they read neither `free` nor `worker`."""
        facts = self.cluster.facts[i]
        return Check(
            needs=self.needs,
            facts=facts,
            free=self._free[i],
            worker=self.needs.worker(0),
            now=self.now,
            place=self.cluster.places[i],
            held=facts.name in self.held,
            known_drives=self.cluster.known_drives,
        )

    def early(self, i: int) -> Rejection | None:
        if i not in self._early:
            self._early[i] = first_rejection(self.check(i), EARLY)
        return self._early[i]

    def late(self, i: int) -> Rejection | None:
        if i not in self._late:
            self._late[i] = first_rejection(self.check(i), LATE)
        return self._late[i]

    def matched(self, i: int) -> gpu_match.Matched:
        if i not in self._matched:
            facts = self.cluster.facts[i]
            self._matched[i] = gpu_match.matched(self.needs.gpu_requests, facts.gpus)
        return self._matched[i]
