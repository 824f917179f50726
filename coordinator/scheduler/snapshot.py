"""The cluster as one pass sees it: every machine's report, what is held there, reservations."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from astraeus.coordinator.machine_records import MachineRecord, MachineRecords
from astraeus.coordinator.placement import ClusterSnapshot, MachineSnapshot, Reservation
from astraeus.coordinator.store import Store
from astraeus.coordinator.store.queue import Usage, read_usage
from astraeus.shared import MachineState
from astraeus.shared.machines import StoredReservation

Key = tuple[object, ...]
Window = tuple[timedelta, datetime | None]
"""`down_after` and `heard_since`: what machines' states are judged by."""


class Views:
    """The views of the last snapshot, reused for machines in which nothing a view reads has
    changed (the record, the same object while its row is; its state; what is held there;
    its reservations): a pass over an unchanged cluster builds no view again, and the same
    view object tells the placement state that the machine did not change.

    The last snapshot itself is kept too, and brought up to date by machine: only machines
    whose record changed since (`MachineRecords.changed_since`) or whose holdings changed get a new
    view, while the machines are the same ones, the reservations too, and no machine's state
    can have changed with time alone (no Up machine's silence has passed `down_after`, and the
    clock has not gone back)."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[MachineRecord, Key, MachineSnapshot]] = {}
        self._last: _Last | None = None

    @property
    def usage(self) -> dict[str, Usage]:
        """What live tasks held, by machine, when the last snapshot was built (the queue walk
        reads their time limits: backfill)."""
        return self._last.usage if self._last is not None else {}

    def reuse(
        self,
        records: MachineRecords,
        now: datetime,
        key: Window,
        usage: dict[str, Usage],
        stored: tuple[StoredReservation, ...],
    ) -> ClusterSnapshot | None:
        """The last snapshot, changed where machines changed; None when it must be built
        afresh (see the class)."""
        last = self._last
        if last is None or last.key != key or last.stored != stored or now < last.built_at:
            return None
        if last.valid_until is not None and now > last.valid_until:
            return None
        changes = records.changes  # first: a change made meanwhile is named again
        names = records.changed_since(last.changes)
        if names is None:
            return None
        changed = set(names)
        if usage != last.usage:
            changed.update(
                n for n in usage.keys() | last.usage.keys() if usage.get(n) != last.usage.get(n)
            )
        machines = list(last.snapshot.machines)
        down_after, heard_since = key
        valid_until = last.valid_until
        for name in changed:
            record, at = records.get(name), last.index.get(name)
            if record is None or at is None:
                return None  # a new machine: built afresh, in name order
            state = record.state(now, down_after, heard_since)
            valid_until = _until(valid_until, record, state, down_after, heard_since)
            held = usage.get(name)
            machines[at] = self.view(record, state, held, last.reservations.get(name, []))
        snapshot = last.snapshot if not changed else ClusterSnapshot(machines=tuple(machines))
        self._last = _Last(
            key,
            max(now, last.built_at),
            valid_until,
            snapshot,
            changes,
            usage,
            stored,
            last.reservations,
            last.index,
        )
        return snapshot

    def keep_last(self, last: _Last) -> None:
        self._last = last

    def view(
        self,
        record: MachineRecord,
        state: MachineState,
        held: Usage | None,
        reservations: list[Reservation],
    ) -> MachineSnapshot:
        key: Key = (state, _held(held), tuple(reservations))
        found = self._kept.get(record.name)
        if found is not None and found[0] is record and found[1] == key:
            return found[2]
        view = _view(record, state, held, reservations)
        self._kept[record.name] = (record, key, view)
        return view

    def keep_only(self, names: set[str]) -> None:
        for gone in self._kept.keys() - names:
            del self._kept[gone]


@dataclass(frozen=True)
class _Last:
    """The last snapshot and what it was built from."""

    key: Window
    built_at: datetime
    valid_until: datetime | None
    """Until when no machine's state can change with time alone: the earliest time an Up
    machine would turn Down."""
    snapshot: ClusterSnapshot
    changes: int
    """`MachineRecords.changes` when it was built."""
    usage: dict[str, Usage]
    stored: tuple[StoredReservation, ...]
    reservations: dict[str, list[Reservation]]
    index: dict[str, int]
    """Each machine's position in `snapshot`."""


def build_snapshot(
    store: Store,
    records: MachineRecords,
    now: datetime,
    down_after: timedelta,
    heard_since: datetime | None = None,
    views: Views | None = None,
) -> ClusterSnapshot:
    """Every machine as a pass sees it; silence counts from `heard_since` at the earliest.
    With `views` (kept between passes), views of unchanged machines are reused, and the last
    snapshot is brought up to date where machines changed (`Views`)."""
    usage = read_usage(store.database)
    stored = tuple(store.reservations.of())
    views = views or Views()
    key: Window = (down_after, heard_since)
    changes = records.changes
    reused = views.reuse(records, now, key, usage, stored)
    if reused is not None:
        return reused
    reservations: dict[str, list[Reservation]] = defaultdict(list)
    for one in stored:
        reservations[one.machine].append(_reservation(one))
    every = records.all()
    built = []
    valid_until: datetime | None = None
    for record in every:
        state = record.state(now, down_after, heard_since)
        valid_until = _until(valid_until, record, state, down_after, heard_since)
        built.append(views.view(record, state, usage.get(record.name), reservations[record.name]))
    views.keep_only({record.name for record in every})
    snapshot = ClusterSnapshot(machines=tuple(built))
    index = {record.name: i for i, record in enumerate(every)}
    last = _Last(key, now, valid_until, snapshot, changes, usage, stored, dict(reservations), index)
    views.keep_last(last)
    return snapshot


def _until(
    valid_until: datetime | None,
    record: MachineRecord,
    state: MachineState,
    down_after: timedelta,
    heard_since: datetime | None,
) -> datetime | None:
    """`valid_until`, made earlier if `record`'s machine is Up and turns Down before it."""
    if state != MachineState.UP:
        return valid_until
    since = record.silent_since(heard_since)
    assert since is not None  # noqa: S101 - an Up machine has been heard from
    turns_down = since + down_after
    return turns_down if valid_until is None else min(valid_until, turns_down)


def _held(held: Usage | None) -> Key:
    if held is None:
        return ()
    return (frozenset(held.gpu_ids), held.cpu_cores, held.memory_bytes, frozenset(held.runs))


def _view(
    record: MachineRecord,
    state: MachineState,
    held: Usage | None,
    reservations: list[Reservation],
) -> MachineSnapshot:
    report = record.report
    key = record.fingerprint or None
    if report is not None and record.admin_labels:
        report = report.model_copy(update={"labels": record.labels})
        key = f"{record.fingerprint}|{sorted(record.admin_labels.items())}"
    held = held or Usage()
    return MachineSnapshot(
        name=record.name,
        state=state,
        report=report,
        site=record.site,
        cordon_reason=record.cordon_reason,
        used_gpu_ids=frozenset(held.gpu_ids),
        used_cpu_cores=held.cpu_cores,
        used_memory_bytes=held.memory_bytes,
        reservations=tuple(reservations),
        workers=tuple(sorted(held.runs)),
        report_key=key,
    )


def _reservation(stored: StoredReservation) -> Reservation:
    return Reservation(dict(stored.labels), stored.workspace, stored.starts_at, stored.ends_at)
