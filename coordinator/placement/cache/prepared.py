"""Verdicts that do not depend on what is free, kept for every run of a pass with the same ask."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from .. import gpu_match
from ..cluster import Cluster
from ..facts import Free
from ..filters import EARLY, LATE, Check, first_rejection
from ..needs import Needs
from ..rejection import Rejection


@dataclass
class StaticVerdicts:
    """Static verdicts of one ask per machine, shared by every session of a live state's
    generation (what a machine is does not change within it)."""

    early: dict[int, Rejection | None] = field(default_factory=dict)
    """The `EARLY` filters (`Reads.MACHINE`, before the first that reads more), for machines not
    held for a run ahead."""
    late: dict[int, Rejection | None] = field(default_factory=dict)
    """The `LATE` filters (`Reads.MACHINE`, after those that read more), for machines not held
    for a run ahead."""
    matched: dict[int, gpu_match.Matched] = field(default_factory=dict)


class Prepared:
    """The `Reads.MACHINE` filters (`EARLY` and `LATE`) and the matching GPUs, per machine, computed
    on first use and kept in `shared` (for every session of the generation); a machine held for a
    run ahead is checked each time."""

    def __init__(
        self,
        cluster: Cluster,
        free: Sequence[Free],
        needs: Needs,
        now: datetime,
        held: frozenset[str],
        shared: StaticVerdicts | None = None,
    ) -> None:
        self.cluster, self._free, self.needs, self.now, self.held = cluster, free, needs, now, held
        self.shared = shared or StaticVerdicts()

    def for_needs(self, needs: Needs) -> Prepared:
        """The same verdicts for another run with the same `static_key`."""
        return Prepared(self.cluster, self._free, needs, self.now, self.held, self.shared)

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
            known_drives=self.cluster.drives_in(self.needs.run.pools),
        )

    def early(self, i: int) -> Rejection | None:
        if self.held and self.cluster.names[i] in self.held:
            return first_rejection(self.check(i), EARLY)
        early = self.shared.early
        if i not in early:
            early[i] = first_rejection(self.check(i), EARLY)
        return early[i]

    def late(self, i: int) -> Rejection | None:
        if self.held and self.cluster.names[i] in self.held:
            return first_rejection(self.check(i), LATE)
        late = self.shared.late
        if i not in late:
            late[i] = first_rejection(self.check(i), LATE)
        return late[i]

    def matched(self, i: int) -> gpu_match.Matched:
        matched = self.shared.matched
        if i not in matched:
            facts = self.cluster.facts[i]
            matched[i] = gpu_match.matched(self.needs.gpu_requests, facts.gpus)
        return matched[i]
