"""The cluster as one pass sees it: every machine's report, what is held there, reservations."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from astraeus.coordinator.placement import ClusterSnapshot, MachineView, Reservation
from astraeus.coordinator.store import MachineRecord, Store
from astraeus.coordinator.store.queue import Usage, read_usage


def build_snapshot(
    store: Store, now: datetime, down_after: timedelta, heard_since: datetime | None = None
) -> ClusterSnapshot:
    """Every machine as a pass sees it; silence counts from `heard_since` at the earliest."""
    usage = read_usage(store.database)
    reservations: dict[str, list[Reservation]] = defaultdict(list)
    for stored in store.reservations.of():
        reservations[stored.machine].append(stored.for_placement())
    views = tuple(
        _view(
            record, now, down_after, heard_since, usage.get(record.name), reservations[record.name]
        )
        for record in store.machines.all()
    )
    return ClusterSnapshot(machines=views)


def _view(
    record: MachineRecord,
    now: datetime,
    down_after: timedelta,
    heard_since: datetime | None,
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
        state=record.state(now, down_after, heard_since),
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
