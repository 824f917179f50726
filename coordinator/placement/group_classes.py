"""A rung's groups in classes of alike machines, for the gang search (`gang.py`).

Machines of one free kind (`kinds.FreeKind`) share their verdicts, caps, slots and free room
(`RunEvaluation` keeps them per free kind), and their score too unless something of the machine
itself counts in it. So a group is judged by its classes, each one machine standing for the
class and how many machines the class holds, not machine by machine, and only the chosen group
is expanded to machines: at 20,000 alike machines in 625 racks that is 625 classes to judge, not
20,000 machines to check and score.

Apart from the classes, each a class of its own, stand the machines whose verdict or score is
their own: held for a run ahead, holding a worker of the run already, whose static verdict is not
known here, under CPU pressure, with an RDMA port at risk, or reserved for labels. Machines a
static filter rejects are left out: they take no worker.

Kept between evaluations (memos of this module, not of the live state): each rung's groups by
free kind, per cluster, and which machines hold workers of which run, each brought up to date
from the machines that changed since (a pass's `take`, the live state's update) and never
changed in place, so that a search holding one is not disturbed by another thread's; each
static verdict set's rejected machines; each cluster's machines with a score of their own.
"""

from __future__ import annotations

import threading
import weakref
from array import array
from bisect import bisect_left
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar

from . import ladder
from .cache.prepared import StaticVerdicts
from .cluster import Cluster
from .evaluation import RunEvaluation
from .facts import Free
from .model import RunKey
from .needs import Needs
from .shape import ShapeOption

ByKind = dict[Hashable, list[int]]
"""One group's machines by free kind, each list in name order."""
Composition = dict[ladder.Key, ByKind]


class Alike(NamedTuple):
    """Machines of one group that share every verdict and score: `machine` stands for them."""

    machine: int
    size: int
    """How many machines the class holds."""
    kind: Hashable | None
    """Their free kind; None for a machine that stands apart."""


class Judged(NamedTuple):
    """What one machine of a class gives a shape: how many workers it takes and the room it
    has free (`RunEvaluation.slots`, `room_free`)."""

    workers: int
    room: float


RungClasses = dict[ladder.Key, list[Alike]]
"""Each group's classes; a group with no machine left in it is left out."""

_UNSEEN = Judged(-1, -1.0)
"""Marks a class not judged yet (None is a judgement: it takes no worker)."""

_CHUNK = 512
"""Kept lists are compared a chunk at a time (in C); only a chunk that differs is walked."""


class Classes:
    """One evaluation's groups by class, rung by rung, and its verdicts and scores per class."""

    def __init__(self, evaluation: RunEvaluation) -> None:
        self._evaluation = evaluation
        self._left_out: tuple[Sequence[int], set[int]] | None = None
        self._judged: dict[ShapeOption, dict[Hashable, Judged | None]] = {}
        self._scores: dict[tuple[Hashable, int, bool], int] = {}
        self._version: _Version | None = None
        self._rungs: dict[str, RungClasses] = {}

    def of(self, rung: ladder.Rung) -> RungClasses:
        """The classes of each group of `rung` for the run, in the evaluation's free state."""
        if rung.name not in self._rungs:
            self._rungs[rung.name] = self._of(rung)
        return self._rungs[rung.name]

    def _of(self, rung: ladder.Rung) -> RungClasses:
        evaluation = self._evaluation
        needs = evaluation.needs
        if self._version is None:
            self._version = _synced(evaluation)
        every = _rung(self._version, evaluation, rung).classes
        if not every:
            return every
        rejected, apart = self._left_out_now()
        # Each group's left-out machines, by free kind: what its classes count less.
        members, free_kinds = evaluation.cluster.members, evaluation.free_kinds
        out: dict[ladder.Key, dict[Hashable, set[int]]] = {}
        for i in (*rejected, *apart):
            key = ladder.group_key(rung, needs, members[i])
            if key is not None:
                out.setdefault(key, {}).setdefault(free_kinds[i], set()).add(i)
        if not out:
            return every
        composition = _rung(self._version, evaluation, rung).composition
        found = dict(every)
        for key, removed in out.items():
            classes = []
            for kind, same in composition[key].items():
                gone = removed.get(kind, ())
                kept = len(same) - len(gone)
                if kept:
                    first = next(i for i in same if i not in gone) if gone else same[0]
                    classes.append(Alike(first, kept, kind))
            classes.extend(
                Alike(i, 1, None) for gone in removed.values() for i in gone if i in apart
            )
            if classes:
                found[key] = classes
            else:
                del found[key]
        return found

    def judged(self, option: ShapeOption) -> Callable[[Alike], Judged | None]:
        """`judge` for one shape: what each machine of a class gives it."""
        known = self._judged.setdefault(option, {})
        judge = self._judge

        def judged(one: Alike) -> Judged | None:
            kind = one.kind
            if kind is None:
                return judge(one.machine, option)
            found = known.get(kind, _UNSEEN)
            if found is _UNSEEN:
                found = known[kind] = judge(one.machine, option)
            return found

        return judged

    def _judge(self, i: int, option: ShapeOption) -> Judged | None:
        """What machine `i` gives `option`; None when it can take no worker of it (fewer free
        GPUs than a worker's, or a filter rejects it)."""
        evaluation, each = self._evaluation, option.gpus_each
        if evaluation.free_gpus[i] < each or not evaluation.passes(i) or evaluation.cap(i) < each:
            return None
        workers = evaluation.slots(i, option) if evaluation.needs.stacks else 1
        return Judged(workers, evaluation.room_free(i))

    def score(self, one: Alike, gpus: int, rdma: bool) -> int:
        """The score of each machine of the class for a worker with `gpus` GPUs."""
        if one.kind is None:
            return self._evaluation.score(one.machine, gpus, rdma)
        key = (one.kind, gpus, rdma)
        if key not in self._scores:
            self._scores[key] = self._evaluation.score(one.machine, gpus, rdma)
        return self._scores[key]

    def _left_out_now(self) -> tuple[Sequence[int], set[int]]:
        """(machines a static filter rejects, machines that stand apart)."""
        if self._left_out is None:
            evaluation = self._evaluation
            rejected, unknown = _static(evaluation)
            apart = set(unknown)
            apart.update(_special(evaluation.cluster))
            apart.update(_held(evaluation))
            if not evaluation.idle:
                apart.update(_here(evaluation.cluster, evaluation.free, evaluation.needs.run.key))
            self._left_out = (rejected, apart)
        return self._left_out


def eligible_by_site(evaluation: RunEvaluation) -> dict[str, list[Alike]]:
    """`RunEvaluation.eligible` by class: each site's classes of machines no filter rejects,
    for a run without `keep_within` nor pinned GPUs (the last rung groups its machines by site
    alone, and its verdicts are each free kind's)."""
    needs = evaluation.needs
    if needs.keep_within is not None or needs.gpu_requests.ids:
        raise ValueError("only a run without keep_within nor pinned GPUs is judged by class")
    classes = Classes(evaluation).of(ladder.RUNGS[-1])
    passes = evaluation.passes
    found = {
        key[0]: [one for one in alike if passes(one.machine)] for key, alike in classes.items()
    }
    return {site: alike for site, alike in found.items() if alike}


def _special(cluster: Cluster) -> frozenset[int]:
    """Machines whose score has a term of their own, not of their free kind: CPU pressure, an
    RDMA port at risk, a reservation for labels (drives: a run mounting any is searched machine
    by machine)."""
    known = _SPECIAL.get(cluster)
    if known is None:
        known = frozenset(
            i
            for i, (facts, place) in enumerate(zip(cluster.facts, cluster.places, strict=True))
            if place.rdma_at_risk
            or (facts.report is not None and facts.report.cpu_pressure)
            or any(reservation.labels for reservation in facts.snapshot.reservations)
        )
        _SPECIAL.put(cluster, known)
    return known


def _held(evaluation: RunEvaluation) -> Iterator[int]:
    """Machines held for a run ahead (names are in name order)."""
    names = evaluation.cluster.names
    for name in evaluation.prepared.held:
        i = bisect_left(names, name)
        if i < len(names) and names[i] == name:
            yield i


@dataclass(frozen=True)
class _Rejected:
    rejected: array[int]
    """Machines a static filter rejects (compact: a frame keeps up to 256 asks' verdicts, and
    in a workspace with pools most machines may be rejected)."""
    unknown: array[int]
    """Machines held for a run ahead when this was made: their own verdict was not read."""


def _static(evaluation: RunEvaluation) -> tuple[Sequence[int], Sequence[int]]:
    """The machines the run's static filters reject, read once per static verdict set (what
    `RunEvaluation.passes` reads, so both always agree)."""
    prepared = evaluation.prepared
    shared = prepared.shared
    known = _REJECTED.get(shared)
    if known is None:
        held, names = prepared.held, evaluation.cluster.names
        rejected, unknown = [], []
        for i in range(len(names)):
            if held and names[i] in held:
                unknown.append(i)
            elif prepared.early(i) is not None or prepared.late(i) is not None:
                rejected.append(i)
        known = _Rejected(array("l", rejected), array("l", unknown))
        _REJECTED.put(shared, known)
    return known.rejected, known.unknown


def _here(cluster: Cluster, free: Sequence[Free], run: RunKey) -> frozenset[int]:
    """Machines holding a worker of the run already (filter 6 is read per machine)."""
    with _LOCK:
        kept = _WORKERS.get(cluster)
    if kept is None or len(kept.free) != len(free):
        kept = _Workers.made(free)
    else:
        changed = _changed(kept.free, free)
        if changed:
            kept = kept.moved(free, changed)
    with _LOCK:
        _WORKERS.put(cluster, kept)
    return kept.where.get(run, frozenset())


@dataclass(frozen=True)
class _Workers:
    """Which machines hold workers of which run, in one list of free capacity."""

    free: list[Free]
    """The list it was made from (a copy: its items are compared by identity first)."""
    where: dict[RunKey, frozenset[int]]

    @staticmethod
    def made(free: Sequence[Free]) -> _Workers:
        where: dict[RunKey, set[int]] = {}
        for i, one in enumerate(free):
            for run in one.workers:
                where.setdefault(run, set()).add(i)
        return _Workers(list(free), {run: frozenset(found) for run, found in where.items()})

    def moved(self, free: Sequence[Free], changed: list[int]) -> _Workers:
        where = dict(self.where)
        for i in changed:
            before, after = self.free[i].workers, free[i].workers
            if before == after:
                continue
            for run in set(before) - set(after):
                where[run] = where[run] - {i}
            for run in set(after) - set(before):
                where[run] = where.get(run, frozenset()) | {i}
        return _Workers(list(free), {run: found for run, found in where.items() if found})


class _Rung(NamedTuple):
    rung: ladder.Rung
    needs: Needs
    """A run's needs that group machines as the rung's key says (by `keep_within` and link)."""
    composition: Composition
    classes: RungClasses
    """The composition as classes, none left out: what a run's classes start from."""


class _Version(NamedTuple):
    """The free kinds (a copy, never changed) and the rungs' groups by free kind made of them."""

    kinds: list[Hashable]
    rungs: dict[tuple[object, ...], _Rung]
    """By (rung, `keep_within`, link)."""


def _synced(evaluation: RunEvaluation) -> _Version:
    """The kept version for the evaluation's free kinds: itself when they are the same, moved
    from it when they changed only in part, else a new one (its rungs made on first use)."""
    cluster, kinds = evaluation.cluster, evaluation.free_kinds
    with _LOCK:
        kept = _VERSIONS.get(cluster)
        if kept is None:
            kept = {}
            _VERSIONS.put(cluster, kept)
        version = kept.get(evaluation.idle)
    if version is None or len(version.kinds) != len(kinds):
        version = _Version(list(kinds), {})
    else:
        changed = _changed(version.kinds, kinds)
        if not changed:
            return version
        if len(changed) * 8 > len(kinds):
            version = _Version(list(kinds), {})
        else:
            moved = {
                key: _moved(entry, cluster, version.kinds, kinds, changed)
                # Copied in one step (in C): another thread may add a rung to this version.
                for key, entry in list(version.rungs.items())
            }
            version = _Version(list(kinds), moved)
    with _LOCK:
        kept[evaluation.idle] = version
    return version


def _rung(version: _Version, evaluation: RunEvaluation, rung: ladder.Rung) -> _Rung:
    """The rung's groups by free kind in `version` (synced with the evaluation), made on first
    use."""
    needs = evaluation.needs
    key = (rung.name, needs.keep_within, needs.link)
    found = version.rungs.get(key)
    if found is None:
        groups = evaluation.cluster.groups(rung, needs)
        kinds = version.kinds
        composition = {group: _by_kind(same, kinds) for group, same in groups.items() if same}
        classes = {group: _classes(by_kind) for group, by_kind in composition.items()}
        version.rungs[key] = found = _Rung(rung, needs, composition, classes)
    return found


def _classes(by_kind: ByKind) -> list[Alike]:
    return [Alike(same[0], len(same), kind) for kind, same in by_kind.items()]


def _by_kind(machines: list[int], kinds: Sequence[Hashable]) -> ByKind:
    by_kind: ByKind = {}
    for i in machines:
        kind = kinds[i]
        same = by_kind.get(kind)
        if same is None:
            by_kind[kind] = [i]
        else:
            same.append(i)
    return by_kind


def _changed(old: Sequence[object], new: Sequence[object]) -> list[int]:
    """Positions whose item is not what it was (equal items count as the same)."""
    changed: list[int] = []
    for start in range(0, len(old), _CHUNK):
        end = start + _CHUNK
        if old[start:end] != new[start:end]:
            changed.extend(i for i in range(start, min(end, len(old))) if old[i] != new[i])
    return changed


def _moved(
    entry: _Rung,
    cluster: Cluster,
    old: Sequence[Hashable],
    new: Sequence[Hashable],
    changed: list[int],
) -> _Rung:
    """The rung's groups with the changed machines moved to their new free kind: a new
    dictionary, its changed groups copied, so a search reading the old one is not disturbed."""
    rung, needs, composition, classes = entry
    moved = dict(composition)
    copied: set[ladder.Key] = set()
    for i in changed:
        group = ladder.group_key(rung, needs, cluster.members[i])
        if group is None or group not in moved:
            continue
        if group not in copied:
            moved[group] = dict(moved[group])
            copied.add(group)
        by_kind = moved[group]
        # Copies made in C (slices), not walked: a class may hold every machine of the rung.
        was = by_kind[old[i]]
        k = bisect_left(was, i)
        if len(was) > 1:
            by_kind[old[i]] = was[:k] + was[k + 1 :]
        else:
            del by_kind[old[i]]
        same = by_kind.get(new[i])
        if same is None:
            by_kind[new[i]] = [i]
        else:
            k = bisect_left(same, i)
            by_kind[new[i]] = [*same[:k], i, *same[k:]]
    now = dict(classes)
    for group in copied:
        now[group] = _classes(moved[group])
    return _Rung(rung, needs, moved, now)


Owner = TypeVar("Owner")
Value = TypeVar("Value")


class _ByIdentity(Generic[Owner, Value]):
    """Values kept for objects by identity, forgotten with the object."""

    def __init__(self) -> None:
        self._kept: dict[int, tuple[weakref.ref[Owner], Value]] = {}

    def get(self, owner: Owner) -> Value | None:
        found = self._kept.get(id(owner))
        if found is None or found[0]() is not owner:
            return None
        return found[1]

    def put(self, owner: Owner, value: Value) -> None:
        known = self._kept.get(id(owner))
        self._kept[id(owner)] = (weakref.ref(owner), value)
        if known is None or known[0]() is not owner:
            weakref.finalize(owner, self._kept.pop, id(owner), None)


_LOCK = threading.Lock()
_SPECIAL: _ByIdentity[Cluster, frozenset[int]] = _ByIdentity()
_REJECTED: _ByIdentity[StaticVerdicts, _Rejected] = _ByIdentity()
_WORKERS: _ByIdentity[Cluster, _Workers] = _ByIdentity()
_VERSIONS: _ByIdentity[Cluster, dict[bool, _Version]] = _ByIdentity()
