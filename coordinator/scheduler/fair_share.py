"""Fair share: among runs of equal priority, the queue puts first the workspace whose decayed
usage divided by its weight is lowest (`store/usage.py` keeps the usage), then submission.

Priority still comes first. The factor is read once per pass, per workspace, and the queue
sorted once (stable, so each run's tasks stay together in index order)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

from .items import Candidate

ItemT = TypeVar("ItemT", bound=Candidate)

Factors = Mapping[str, tuple[float, float]]
"""Per workspace: (decayed GPU-seconds, decayed core-seconds), each divided by its weight;
a workspace not named has used nothing."""

NONE_USED = (0.0, 0.0)


def fair_order(items: Sequence[ItemT], factors: Factors) -> list[ItemT]:
    """`items` (in priority, then submission order) reordered: priority, then the workspace's
    factor (GPU usage, then core usage for runs of workspaces with equal GPU usage), then the
    order they came in."""
    if not any(factors.get(item.workspace, NONE_USED) != NONE_USED for item in items):
        return list(items)
    return sorted(items, key=lambda item: (-item.priority, factors.get(item.workspace, NONE_USED)))


def guaranteed_first(
    items: Sequence[ItemT], guarantees: Mapping[str, int], held: Mapping[str, int]
) -> list[ItemT]:
    """`items` (in queue order) with, among runs of equal priority, those that keep their
    workspace within its guarantee (`guaranteed_gpus`, counting what it `held` and its runs
    ahead in the queue) first: a workspace's guaranteed GPUs go to it before any other
    workspace borrows them, so a run that reclaimed them is not overtaken by the runs it
    stopped (Kueue admits within nominal quota before borrowing). Otherwise the order is kept."""
    if not any(guarantees.values()):
        return list(items)
    counted = dict(held)
    within: dict[int, bool] = {}
    for i, item in enumerate(items):
        gpus = item.ask.gpu_count
        total = counted.get(item.workspace, 0) + gpus
        within[i] = gpus > 0 and total <= guarantees.get(item.workspace, 0)
        if within[i]:
            counted[item.workspace] = total
    order = sorted(range(len(items)), key=lambda i: (-items[i].priority, not within[i]))
    return [items[i] for i in order]


def ahead_of(item: Candidate, queue: Sequence[ItemT], factors: Factors) -> list[ItemT]:
    """The queued runs a dry run of `item` would wait behind: higher priority, or equal
    priority and a factor no higher than its workspace's."""
    mine = factors.get(item.workspace, NONE_USED)
    return [
        q
        for q in queue
        if q.priority > item.priority
        or (q.priority == item.priority and factors.get(q.workspace, NONE_USED) <= mine)
    ]
