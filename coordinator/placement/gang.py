"""Placing the whole run on the ladder: the first rung where it fits; on that rung the group that
leaves the least room free, then the best score, then the group's name."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from astraeus.shared import Spread

from .decision import Decision
from .ladder import RDMA_RUNGS, RUNGS, Key, Member, Rung, group_key
from .shape import ShapeOption


@dataclass(frozen=True)
class Choice:
    """Where the run goes: a rung, a shape, and the machines of one group, one worker each."""

    rung: Rung
    option: ShapeOption
    machines: tuple[int, ...]
    key: Key


def search(
    decision: Decision, rungs: Sequence[Rung], options: Sequence[ShapeOption] | None = None
) -> Choice | None:
    """The first rung, tightest first, where some group holds one of the shapes."""
    shapes = decision.options if options is None else options
    for rung in rungs:
        groups = _groups(decision, rung)
        for option in shapes:
            if rung.single != (option.tasks == 1):
                continue
            best = _best_single(decision, option) if rung.single else None
            if not rung.single:
                best = _best_group(decision, rung, groups, option)
            if best is not None:
                return best
    return None


def _groups(decision: Decision, rung: Rung) -> dict[Key, list[int]]:
    if rung.single:
        return {}
    members, needs = decision.cluster.members, decision.needs
    groups: dict[Key, list[int]] = defaultdict(list)
    for i in decision.eligible:
        key = group_key(rung, needs, members[i])
        if key is not None:
            groups[key].append(i)
    return groups


def _best_single(decision: Decision, option: ShapeOption) -> Choice | None:
    """A single worker goes to the highest score; ties by machine name."""
    best: tuple[int, int] | None = None
    for i in decision.eligible:
        if decision.cap(i) < option.gpus_each:
            continue
        score = decision.score(i, option.gpus_each, False)
        if best is None or score > best[0]:
            best = (score, i)
    if best is None:
        return None
    i = best[1]
    return Choice(RUNGS[0], option, (i,), (decision.cluster.facts[i].name,))


def _best_group(
    decision: Decision, rung: Rung, groups: dict[Key, list[int]], option: ShapeOption
) -> Choice | None:
    best: tuple[float, int, Key] | None = None
    chosen: tuple[int, ...] = ()
    rdma = rung.name in RDMA_RUNGS
    for key in sorted(groups):
        fits = [i for i in groups[key] if decision.cap(i) >= option.gpus_each]
        if len(fits) < option.tasks:
            continue
        picked = _pick(decision, fits, option, rdma)
        if picked is None:
            continue
        room = sum(decision.room_free(i) for i in fits) - _used(decision, option)
        score = sum(decision.score(i, option.gpus_each, rdma) for i in picked)
        rank = (room, -score, key)
        if best is None or rank < best:
            best, chosen = rank, picked
    if best is None:
        return None
    return Choice(rung, option, chosen, best[2])


def _used(decision: Decision, option: ShapeOption) -> float:
    if decision.needs.gpus:
        return option.tasks * option.gpus_each
    return option.tasks * decision.needs.worker(0).cpu_cores


def _pick(
    decision: Decision, fits: list[int], option: ShapeOption, rdma: bool
) -> tuple[int, ...] | None:
    """The group's best `tasks` machines by score, one per rack or fabric when spread says so."""
    names = decision.cluster.facts
    ranked = sorted(fits, key=lambda i: (-decision.score(i, option.gpus_each, rdma), names[i].name))
    spread = decision.needs.spread
    picked: list[int] = []
    seen: set[str | None] = set()
    for i in ranked:
        domain = _spread_domain(spread, decision.cluster.members[i])
        if domain is not None:
            if domain in seen:
                continue
            seen.add(domain)
        picked.append(i)
        if len(picked) == option.tasks:
            return tuple(sorted(picked, key=lambda j: names[j].name))
    return None


def _spread_domain(spread: Spread | None, member: Member) -> str | None:
    """The rack or fabric that may hold only one worker; None when machines alone count."""
    if spread is Spread.RACK:
        return member.rack
    if spread is Spread.FABRIC:
        return member.fabric
    return None
