"""A pass over an unchanged cluster reuses what it read before: the worker keeps the record of
a machine whose row did not change, and the snapshot keeps the view of a machine in which
nothing a view reads changed; the result always equals a snapshot built afresh."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from astraeus.coordinator.machine_records import MachineRecords
from astraeus.coordinator.placement import ClusterSnapshot
from astraeus.coordinator.scheduler.snapshot import Views, build_snapshot
from astraeus.coordinator.store import Store

from .conftest import Cluster

DOWN_AFTER = timedelta(seconds=30)


async def test_an_unchanged_row_keeps_its_record(fake_cluster: Cluster) -> None:
    """After a reload with no change in the file, every record is the same object; a cordon
    gives only that machine a new one."""
    c = fake_cluster
    for name in ("gpu-01", "gpu-02"):
        await c.report(name)
    opened = Store.open(c.store.database.location)
    reader = MachineRecords(opened)
    one, two = reader.get("gpu-01"), reader.get("gpu-02")
    reader.reload()
    assert reader.get("gpu-01") is one
    assert reader.get("gpu-02") is two
    status, _ = await c.call("POST", "/api/v1/machines/gpu-02/cordon", body={"reason": "fan"})
    assert status == 200
    reader.reload()
    again = reader.get("gpu-02")
    assert reader.get("gpu-01") is one
    assert again is not two
    assert again is not None
    assert again.cordon_reason == "fan"
    opened.close()


async def test_views_are_reused_until_something_they_read_changes(fake_cluster: Cluster) -> None:
    """A second snapshot with kept views returns the same view objects; a placement gives the
    machine it landed on a new view with its GPUs used, time turning a machine Down gives it a
    new view, and every snapshot equals one built without kept views."""
    c = fake_cluster
    await c.workspace("vision")
    for name in ("gpu-01", "gpu-02"):
        await c.report(name)
    views, now = Views(), c.clock.now()
    first = build_snapshot(c.store, c.records, now, DOWN_AFTER, now, views)
    second = build_snapshot(c.store, c.records, now, DOWN_AFTER, now, views)
    assert [a is b for a, b in zip(first.machines, second.machines, strict=True)] == [True, True]
    await c.submit("vision", "train", gpus=8)
    await c.run_pass()
    third = build_snapshot(c.store, c.records, now, DOWN_AFTER, now, views)
    changed = [a is not b for a, b in zip(second.machines, third.machines, strict=True)]
    assert changed.count(True) == 1
    assert sorted(len(v.used_gpu_ids) for v in third.machines) == [0, 8]
    assert third == build_snapshot(c.store, c.records, now, DOWN_AFTER, now)
    later = now + DOWN_AFTER + timedelta(seconds=1)
    fourth = build_snapshot(c.store, c.records, later, DOWN_AFTER, now, views)
    assert [v.state.value for v in fourth.machines] == ["Down", "Down"]
    assert fourth == build_snapshot(c.store, c.records, later, DOWN_AFTER, now)


async def test_the_whole_snapshot_is_reused_until_the_cluster_changes(
    fake_cluster: Cluster,
) -> None:
    """With nothing changed and no Up machine's silence past `down_after`, the last snapshot
    itself is returned; a report, a cordon, a placement, a reservation, time past `down_after`
    and a clock set back each give a new one, and every snapshot equals one built afresh."""
    c = fake_cluster
    await c.workspace("vision")
    for name in ("gpu-01", "gpu-02"):
        await c.report(name)
    views, now = Views(), c.clock.now()

    def snapshot(at: datetime) -> ClusterSnapshot:
        kept = build_snapshot(c.store, c.records, at, DOWN_AFTER, now, views)
        assert kept == build_snapshot(c.store, c.records, at, DOWN_AFTER, now)
        return kept

    last = snapshot(now)
    assert snapshot(now) is last
    assert snapshot(now + DOWN_AFTER) is last  # silent for exactly `down_after`: still Up
    changes: list[tuple[str, Callable[[], Awaitable[object]], timedelta]] = [
        ("report", lambda: c.report("gpu-01"), timedelta(0)),
        ("cordon", lambda: c.call("POST", "/api/v1/machines/gpu-02/cordon", body={}), timedelta(0)),
        ("placement", lambda: _place(c), timedelta(0)),
        ("reservation", lambda: _reserve(c), timedelta(0)),
        ("time", _nothing, DOWN_AFTER + timedelta(seconds=1)),
        ("clock set back", _nothing, -timedelta(seconds=1)),
    ]
    for what, change, later in changes:
        await change()
        again = snapshot(now + later)
        assert (what, again is last) == (what, False)
        assert snapshot(now + later) is again
        last = again
    assert [v.state.value for v in snapshot(now + DOWN_AFTER * 2).machines] == ["Down", "Down"]


async def _place(c: Cluster) -> None:
    await c.submit("vision", "train", gpus=8)
    await c.run_pass()


async def _reserve(c: Cluster) -> None:
    body = {
        "workspace": "vision",
        "starts_at": "2026-10-01T10:00:00+00:00",
        "ends_at": "2026-10-01T12:00:00+00:00",
    }
    status, _ = await c.call("POST", "/api/v1/machines/gpu-01/reservations", body=body)
    assert status == 201


async def _nothing() -> None:
    return None
