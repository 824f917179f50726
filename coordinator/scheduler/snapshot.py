"""The cluster as one pass sees it: every machine's report, what is held there, reservations."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from astraeus.coordinator.placement import ClusterSnapshot, MachineView, Reservation
from astraeus.coordinator.store import MachineRecord, Store
from astraeus.coordinator.store.queue import Usage, read_usage
from astraeus.shared import MachineState

Key = tuple[object, ...]


class Views:
    """The views of the last snapshot, reused for machines in which nothing a view reads has
    changed (the record, the same object while its row is; its state; what is held there;
    its reservations): a pass over an unchanged cluster builds no view again, and the same
    view object tells the placement state that the machine did not change."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[MachineRecord, Key, MachineView]] = {}

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
    With `views` (kept between passes), views of unchanged machines are reused."""
    usage = read_usage(store.database)
    reservations: dict[str, list[Reservation]] = defaultdict(list)
    for stored in store.reservations.of():
        reservations[stored.machine].append(stored.for_placement())
    views = views or Views()
    records = store.machines.all()
    built = tuple(
        views.view(
            record,
            record.state(now, down_after, heard_since),
            usage.get(record.name),
            reservations[record.name],
        )
        for record in records
    )
    views.keep_only({record.name for record in records})
    return ClusterSnapshot(machines=built)


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
