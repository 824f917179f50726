"""Placing the whole run on the ladder: the first rung where it fits; on that rung the group that
leaves the least room free, then the best score, then the group's name. A single worker goes to
the highest score.

Workers that may share a machine (`mode: Any`) stack: the one-machine rung holds every shape
whose workers fit on one machine together, and in a group the best machines by score each take
as many workers as they have room for."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from astraeus.shared import Spread

from . import single
from .cache.free_index import FreeIndex
from .evaluation import RunEvaluation
from .group_classes import Alike, Classes, Judged
from .ladder import RUNGS, Key, Member, Rung
from .shape import ShapeOption


@dataclass(frozen=True)
class Choice:
    """Where the run goes: a rung, a shape, and the machine of each worker, in name order (a
    machine appears once per worker it takes)."""

    rung: Rung
    option: ShapeOption
    machines: tuple[int, ...]
    key: Key


def search(
    evaluation: RunEvaluation,
    rungs: Sequence[Rung],
    index: FreeIndex | None = None,
) -> Choice | None:
    """The first rung, tightest first, where some group holds one of the shapes. With `index`
    (current free capacity) a single worker is found without checking every machine; groups
    are judged by their classes of alike machines (`group_classes.py`)."""
    return _search(evaluation, rungs, index, alike=_by_class(evaluation))


def reference_search(
    evaluation: RunEvaluation, rungs: Sequence[Rung], index: FreeIndex | None = None
) -> Choice | None:
    """`search` judging every group machine by machine: what the class search must equal (its
    property test calls this), and the search over part of the cluster a head makes
    (`PlacementSession.idle_machines`: the machines left out have no free GPUs in `evaluation`,
    which the classes, kept per free state, do not see)."""
    return _search(evaluation, rungs, index, alike=False)


def _search(
    evaluation: RunEvaluation, rungs: Sequence[Rung], index: FreeIndex | None, *, alike: bool
) -> Choice | None:
    stacks = evaluation.needs.stacks
    classes = Classes(evaluation) if alike else None
    for rung in rungs:
        for option in evaluation.options:
            if rung.single != (option.tasks == 1) and not (rung.single and stacks):
                continue
            if option.gpus_each > evaluation.cluster.most_gpus:
                continue
            if rung.single and option.tasks > 1:
                best = _stacked_single(evaluation, option)
            elif rung.single:
                best = _single(evaluation, option, index)
            elif classes is not None:
                best = _best_class_group(classes, evaluation, rung, option)
            else:
                groups = evaluation.cluster.groups(rung, evaluation.needs)
                best = _best_group(evaluation, rung, groups, option)
            if best is not None:
                return best
    return None


def _by_class(evaluation: RunEvaluation) -> bool:
    """Whether groups may be judged by class: not when a run spreads one worker per rack or
    fabric (which machine of a class goes where matters), mounts drives (drive terms are each
    machine's own) or pins GPUs."""
    needs = evaluation.needs
    if needs.spread in (Spread.RACK, Spread.FABRIC):
        return False
    return not needs.ask.drives and not needs.gpu_requests.ids


def _single(
    evaluation: RunEvaluation, option: ShapeOption, index: FreeIndex | None
) -> Choice | None:
    if index is not None:
        i = single.best(evaluation, index, option.gpus_each)
    else:
        i = _scan_single(evaluation, option.gpus_each)
    if i is None:
        return None
    return Choice(RUNGS[0], option, (i,), (evaluation.cluster.facts[i].name,))


def _stacked_single(evaluation: RunEvaluation, option: ShapeOption) -> Choice | None:
    """Every worker on one machine: the highest score among machines with room for them all."""
    found: tuple[int, int] | None = None
    for i in evaluation.eligible:
        if evaluation.slots(i, option) >= option.tasks:
            rank = (evaluation.score(i, option.gpus_each, False), -i)
            found = rank if found is None or rank > found else found
    if found is None:
        return None
    i = -found[1]
    return Choice(RUNGS[0], option, (i,) * option.tasks, (evaluation.cluster.facts[i].name,))


def _scan_single(evaluation: RunEvaluation, gpus: int) -> int | None:
    found: tuple[int, int] | None = None
    for i in evaluation.eligible:
        if evaluation.cap(i) >= gpus:
            rank = (evaluation.score(i, gpus, False), -i)
            found = rank if found is None or rank > found else found
    return None if found is None else -found[1]


def _best_group(
    evaluation: RunEvaluation, rung: Rung, groups: dict[Key, list[int]], option: ShapeOption
) -> Choice | None:
    """Least room left free first; only the groups tied on that are scored."""
    each, tasks = option.gpus_each, option.tasks
    sized: list[tuple[float, Key, list[int]]] = []
    free_gpus = evaluation.free_gpus
    stacks = evaluation.needs.stacks
    for key, members in groups.items():
        if len(members) < tasks and not stacks:
            continue
        # Counting free GPUs is cheap; checking machines is not: check only groups that could.
        roomy = [i for i in members if free_gpus[i] >= each]
        if _workers_bound(free_gpus, roomy, option, stacks) < tasks:
            continue
        fits = [i for i in roomy if evaluation.passes(i) and evaluation.cap(i) >= each]
        held = sum(evaluation.slots(i, option) for i in fits) if stacks else len(fits)
        if held >= tasks and _spread_ok(evaluation, fits, tasks):
            room = sum(evaluation.room_free(i) for i in fits) - _used(evaluation, option)
            sized.append((room, key, fits))
    if not sized:
        return None
    least = min(room for room, _key, _fits in sized)
    rdma = rung.rdma
    ranked: list[tuple[int, Key, tuple[int, ...]]] = []
    for room, key, fits in sized:
        if room == least:
            picked = _pick(evaluation, fits, option, rdma)
            score = sum(evaluation.score(i, each, rdma) for i in picked)
            ranked.append((-score, key, picked))
    _score, key, picked = min(ranked)
    return Choice(rung, option, picked, key)


def _best_class_group(
    classes: Classes, evaluation: RunEvaluation, rung: Rung, option: ShapeOption
) -> Choice | None:
    """`_best_group` by class: the same group, judged from each class's machine and size.
    Room is summed as size × room, which equals the machines' sum only where room is whole
    (GPUs always are; cores may not be): otherwise the rung is judged machine by machine."""
    each, tasks = option.gpus_each, option.tasks
    stacks = evaluation.needs.stacks
    free_gpus = evaluation.free_gpus
    judged_of = classes.judged(option)
    sized: list[tuple[float, Key, list[tuple[Alike, Judged]]]] = []
    for key, alike in classes.of(rung).items():
        # Counting free GPUs is cheap; judging classes is not: judge only groups that could.
        roomy = [one for one in alike if free_gpus[one.machine] >= each]
        if _class_bound(free_gpus, roomy, option, stacks) < tasks:
            continue
        held, room = 0, 0.0
        fits: list[tuple[Alike, Judged]] = []
        for one in roomy:
            judged = judged_of(one)
            if judged is not None:
                held += judged.workers * one.size
                room += judged.room * one.size
                fits.append((one, judged))
                if not float(judged.room).is_integer():
                    groups = evaluation.cluster.groups(rung, evaluation.needs)
                    return _best_group(evaluation, rung, groups, option)
        if held >= tasks:
            sized.append((room - _used(evaluation, option), key, fits))
    if not sized:
        return None
    least = min(room for room, _key, _fits in sized)
    rdma = rung.rdma
    # Groups made of the same classes score the same: each such make-up is scored once.
    scored: dict[tuple[tuple[Hashable, int], ...], int] = {}
    ranked = []
    for room, key, fits in sized:
        if room != least:
            continue
        plain = all(one.kind is not None for one, _judged in fits)
        makeup = tuple((one.kind, one.size) for one, _judged in fits) if plain else None
        score = scored.get(makeup) if makeup is not None else None
        if score is None:
            score = _best_score(classes, fits, option, rdma)
            if makeup is not None:
                scored[makeup] = score
        ranked.append((-score, key))
    _score, key = min(ranked)
    each, free_gpus = option.gpus_each, evaluation.free_gpus
    members = evaluation.cluster.groups(rung, evaluation.needs)[key]
    fits_now = [
        i
        for i in members
        if free_gpus[i] >= each and evaluation.passes(i) and evaluation.cap(i) >= each
    ]
    return Choice(rung, option, _pick(evaluation, fits_now, option, rdma), key)


def _class_bound(
    free_gpus: Sequence[int], roomy: list[Alike], option: ShapeOption, stacks: bool
) -> int:
    """`_workers_bound` from the classes."""
    if not stacks:
        return sum(one.size for one in roomy)
    if not option.gpus_each:
        return option.tasks if roomy else 0
    return sum(free_gpus[one.machine] // option.gpus_each * one.size for one in roomy)


def _best_score(
    classes: Classes, fits: list[tuple[Alike, Judged]], option: ShapeOption, rdma: bool
) -> int:
    """What `_pick`'s machines score together, from the classes: the best classes first, each
    taking its machines' workers (machines tied on score give the same sum in any order)."""
    left, total = option.tasks, 0
    scored = sorted(
        ((classes.score(one, option.gpus_each, rdma), one, judged) for one, judged in fits),
        key=lambda found: -found[0],
    )
    for score, one, judged in scored:
        taken = min(judged.workers * one.size, left)
        total += score * taken
        left -= taken
        if not left:
            break
    return total


def _workers_bound(
    free_gpus: Sequence[int], roomy: list[int], option: ShapeOption, stacks: bool
) -> int:
    """At most how many workers the machines could take, from their free GPUs alone."""
    if not stacks:
        return len(roomy)
    if not option.gpus_each:
        return option.tasks if roomy else 0
    return sum(free_gpus[i] // option.gpus_each for i in roomy)


def _used(evaluation: RunEvaluation, option: ShapeOption) -> float:
    if evaluation.needs.gpus:
        return option.tasks * option.gpus_each
    return option.tasks * evaluation.needs.worker(0).cpu_cores


def _spread_ok(evaluation: RunEvaluation, fits: list[int], tasks: int) -> bool:
    """Enough distinct racks or fabrics when the run spreads one worker per rack or fabric."""
    spread = evaluation.needs.spread
    if spread not in (Spread.RACK, Spread.FABRIC):
        return True
    members = evaluation.cluster.members
    return len({_spread_domain(spread, members[i]) for i in fits}) >= tasks


def _pick(
    evaluation: RunEvaluation, fits: list[int], option: ShapeOption, rdma: bool
) -> tuple[int, ...]:
    """The group's best `tasks` machines by score, one per rack or fabric when spread says so;
    when workers stack, each of the best takes as many workers as it has room for."""
    ranked = sorted(fits, key=lambda i: (-evaluation.score(i, option.gpus_each, rdma), i))
    if evaluation.needs.stacks:
        return _stack(evaluation, ranked, option)
    spread = evaluation.needs.spread
    picked: list[int] = []
    seen: set[str | None] = set()
    for i in ranked:
        domain = _spread_domain(spread, evaluation.cluster.members[i])
        if domain is not None:
            if domain in seen:
                continue
            seen.add(domain)
        picked.append(i)
        if len(picked) == option.tasks:
            break
    return tuple(sorted(picked))


def _stack(evaluation: RunEvaluation, ranked: list[int], option: ShapeOption) -> tuple[int, ...]:
    picked: list[int] = []
    for i in ranked:
        take = min(evaluation.slots(i, option), option.tasks - len(picked))
        picked.extend([i] * take)
        if len(picked) == option.tasks:
            break
    return tuple(sorted(picked))


def _spread_domain(spread: Spread | None, member: Member) -> str | None:
    """The rack or fabric that may hold only one worker; None when machines alone count."""
    if spread is Spread.RACK:
        return member.rack
    if spread is Spread.FABRIC:
        return member.fabric
    return None
