"""The cluster as one pass sees it: every machine's report, what is held there, reservations."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from astraeus.coordinator.placement import ClusterSnapshot, MachineView, Reservation
from astraeus.coordinator.store import MachineRecord, Store
from astraeus.coordinator.store.queue import Usage, read_usage
from astraeus.shared import MachineState
from astraeus.shared.machines import StoredReservation

Key = tuple[object, ...]


class Views:
    """The views of the last snapshot, reused for machines in which nothing a view reads has
    changed (the record, the same object while its row is; its state; what is held there;
    its reservations): a pass over an unchanged cluster builds no view again, and the same
    view object tells the placement state that the machine did not change."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[MachineRecord, Key, MachineView]] = {}
        self._last: tuple[Key, datetime, datetime | None, ClusterSnapshot] | None = None
        """The last snapshot, what it was built from, when, and until when no machine's state
        can change with time alone (the earliest time an Up machine would turn Down)."""

    def reuse(self, key: Key, now: datetime) -> ClusterSnapshot | None:
        """The last snapshot, when it was built from the same inputs and no machine's state has
        changed since with time alone (a clock set back is a change too)."""
        if self._last is None:
            return None
        last_key, built_at, valid_until, snapshot = self._last
        if last_key != key or now < built_at or (valid_until is not None and now > valid_until):
            return None
        return snapshot

    def keep_last(
        self, key: Key, now: datetime, valid_until: datetime | None, snapshot: ClusterSnapshot
    ) -> None:
        self._last = (key, now, valid_until, snapshot)

    def view(
        self,
        record: MachineRecord,
        state: MachineState,
        held: Usage | None,
        reservations: list[Reservation],
    ) -> MachineView:
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


def build_snapshot(
    store: Store,
    now: datetime,
    down_after: timedelta,
    heard_since: datetime | None = None,
    views: Views | None = None,
) -> ClusterSnapshot:
    """Every machine as a pass sees it; silence counts from `heard_since` at the earliest.
    With `views` (kept between passes), views of unchanged machines are reused, and the whole
    last snapshot when nothing it was built from changed (the machines' records, what tasks
    hold, the reservations) and no Up machine's silence has passed `down_after` since."""
    usage = read_usage(store.database)
    stored = store.reservations.of()
    views = views or Views()
    key: Key = (store.machines.changes, down_after, heard_since, usage, stored)
    reused = views.reuse(key, now)
    if reused is not None:
        return reused
    reservations: dict[str, list[Reservation]] = defaultdict(list)
    for one in stored:
        reservations[one.machine].append(_reservation(one))
    records = store.machines.all()
    built = []
    valid_until: datetime | None = None
    for record in records:
        state = record.state(now, down_after, heard_since)
        if state == MachineState.UP:
            since = record.silent_since(heard_since)
            assert since is not None  # noqa: S101 - an Up machine has been heard from
            turns_down = since + down_after
            valid_until = turns_down if valid_until is None else min(valid_until, turns_down)
        built.append(views.view(record, state, usage.get(record.name), reservations[record.name]))
    views.keep_only({record.name for record in records})
    snapshot = ClusterSnapshot(machines=tuple(built))
    views.keep_last(key, now, valid_until, snapshot)
    return snapshot


def _held(held: Usage | None) -> Key:
    if held is None:
        return ()
    return (frozenset(held.gpu_ids), held.cpu_cores, held.memory_bytes, frozenset(held.runs))


def _view(
    record: MachineRecord,
    state: MachineState,
    held: Usage | None,
    reservations: list[Reservation],
) -> MachineView:
    report = record.report
    key = record.fingerprint or None
    if report is not None and record.admin_labels:
        report = report.model_copy(update={"labels": record.labels})
        key = f"{record.fingerprint}|{sorted(record.admin_labels.items())}"
    held = held or Usage()
    return MachineView(
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
