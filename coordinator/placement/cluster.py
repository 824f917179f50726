"""The machines of a session as one run's network sees them (its `min_gbps` decides which RDMA
ports count), with the ladder's group keys computed once per rule set."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

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
    _groups: dict[tuple[object, ...], Groups] = field(default_factory=dict)

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
