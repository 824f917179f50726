"""The machines of a session as one run's network sees them (its `min_gbps` decides which RDMA
ports count), with the ladder's group keys computed once per rule set."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from astraeus.shared.labels import POOL

from . import ladder
from .fabrics import NetworkPlace
from .facts import MachineFacts
from .needs import Needs
from .scores import Home

Groups = dict[ladder.Key, list[int]]


@dataclass(frozen=True)
class Cluster:
    facts: Sequence[MachineFacts]
    places: Sequence[NetworkPlace]
    members: Sequence[ladder.Member]
    known_drives: frozenset[str]
    drive_homes: dict[str, tuple[Home, ...]]
    label_reservations: bool = False
    """Some machine is reserved for labels (its runs may score up to +95 for it)."""
    most_gpus: int = 0
    """The most GPUs any machine has: no worker can get more."""
    most_capacity: tuple[float, int] = (0.0, 0)
    """The most cores and the most memory any machine has."""
    names: Sequence[str] = ()
    capacity: Sequence[tuple[float, int]] = ()
    """Each machine's (cores, memory), 0 when it never reported: read for every machine of an
    explanation, so kept in one list rather than behind three objects each."""
    _groups: dict[tuple[object, ...], Groups] = field(default_factory=dict)
    _drives_in: dict[tuple[str, ...], frozenset[str]] = field(default_factory=dict)

    def drives_in(self, pools: tuple[str, ...]) -> frozenset[str]:
        """The drives that exist for a workspace of `pools`: those some machine of its pools
        reports (every machine's, for a workspace without pools). A drive only another pool has
        reads to it as one that does not exist, never as "not reachable": a member learns
        nothing of other pools' drives."""
        if not pools:
            return self.known_drives
        if pools not in self._drives_in:
            mine = [f.reported_drives for f in self.facts if f.snapshot.labels.get(POOL) in pools]
            self._drives_in[pools] = frozenset().union(*mine)
        return self._drives_in[pools]

    def groups(self, rung: ladder.Rung, needs: Needs) -> Groups:
        """The machines of each group on `rung` under the run's rules, in name order."""
        cache_key = (rung.name, needs.keep_within, needs.link)
        if cache_key not in self._groups:
            groups: Groups = {}
            for i, member in enumerate(self.members):
                key = ladder.group_key(rung, needs, member)
                if key is not None:
                    groups.setdefault(key, []).append(i)
            self._groups[cache_key] = groups
        return self._groups[cache_key]
