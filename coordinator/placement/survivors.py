"""What keeps out machines that pass every filter when the whole run still does not fit: the
topology filter's verdict on the gang, against where its other workers would be."""

from __future__ import annotations

from collections import defaultdict

from astraeus.shared import Interconnect, reasons

from .decision import Decision
from .explain import Survivor
from .filters import topology
from .rejection import Rejection


def gang_rejection(decision: Decision, could_fit: bool) -> Survivor:
    """The same text for every survivor; `could_fit` (the run fits an idle cluster) makes it a
    room reason, with each machine's own free room as its share of the need."""
    text, need = _text(decision)

    def survivor(i: int) -> Rejection:
        have = decision.room_free(i) if decision.needs.gpus else 1
        return Rejection(topology.NAME, text, could_fit, need, have)

    return survivor


def _text(decision: Decision) -> tuple[str, float]:
    needs = decision.needs
    need = needs.gpus or max((option.tasks for option in decision.options), default=1)
    if needs.keep_within is not None:
        return topology.NO_ROOM_WITHIN[needs.keep_within], need
    if needs.interconnect in topology.NO_ROOM_ON:
        return topology.NO_ROOM_ON[needs.interconnect], need
    if needs.asks_rdma:
        return topology.NO_ROOM_ON[Interconnect.RDMA], need
    return _room_text(decision, need), need


def _room_text(decision: Decision, need: int) -> str:
    by_site: dict[str, int] = defaultdict(int)
    for i in decision.eligible:
        by_site[decision.cluster.facts[i].site] += decision.cap(i) if decision.needs.gpus else 1
    total = sum(by_site.values())
    unit = "GPUs" if decision.needs.gpus else "workers"
    largest = max(by_site.items(), key=lambda item: (item[1], item[0]), default=("", 0))
    if len(by_site) > 1 and largest[1] < need <= total:
        detail = (
            f"the largest, {largest[0] or 'unnamed'}, has room for {largest[1]} of {need} {unit}"
        )
        return reasons.spans_sites(_sites_needed(by_site, need), detail)
    return topology.no_room(need, total, len(decision.eligible), unit)


def _sites_needed(by_site: dict[str, int], need: int) -> int:
    held = 0
    for count, room in enumerate(sorted(by_site.values(), reverse=True), start=1):
        held += room
        if held >= need:
            return count
    return len(by_site)


def waiting(text: str) -> Survivor:
    """Machines that could take the run now, while it waits for a tighter rung."""

    def survivor(i: int) -> Rejection:
        return Rejection(topology.NAME, text)

    return survivor
