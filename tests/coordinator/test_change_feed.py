"""The machines' change feed: every write stamps the row past every other, so a second process
(the pass worker) reads only the machines changed since its last read, and a snapshot brought up
to date by machine always equals one built afresh."""

from __future__ import annotations

import random
from datetime import timedelta

from astraeus.coordinator.machine_records import MachineRecords
from astraeus.coordinator.scheduler.snapshot import Views, build_snapshot
from astraeus.coordinator.store import Store

from .conftest import Cluster

DOWN_AFTER = timedelta(seconds=30)


def stamps(store: Store) -> dict[str, int]:
    rows = store.database.read("SELECT name, stamp FROM machines")
    return {row["name"]: row["stamp"] for row in rows}


async def test_every_write_stamps_the_machine_past_every_other(store_cluster: Cluster) -> None:
    """A new report, a flushed heartbeat, a cordon and new labels each give the machine written
    the highest stamp of the file."""
    c = store_cluster
    for name in ("gpu-01", "gpu-02", "gpu-03"):
        await c.report(name)
    writes = [
        ("gpu-01", lambda: c.report("gpu-01", gpus=4)),
        ("gpu-02", lambda: c.call("POST", "/api/v1/machines/gpu-02/cordon", body={})),
        ("gpu-03", lambda: c.label("gpu-03", pool="a")),
    ]
    for name, write in writes:
        await write()
        found = stamps(c.store)
        assert max(found, key=found.__getitem__) == name
    c.clock.advance(1)
    await c.report("gpu-02")  # a heartbeat: kept in memory until flushed
    c.records.flush_seen()
    found = stamps(c.store)
    assert max(found, key=found.__getitem__) == "gpu-02"
    assert len(set(found.values())) == 3


async def test_a_reader_rereads_only_machines_changed_since(store_cluster: Cluster) -> None:
    """A reload with nothing written changes no record; after a report and a cordon it names
    exactly those two machines as changed, and their records hold what was written."""
    c = store_cluster
    for name in ("gpu-01", "gpu-02", "gpu-03"):
        await c.report(name)
    opened = Store.open(c.store.database.location)
    reader = MachineRecords(opened)
    before = reader.changes
    reader.reload()
    assert reader.changes == before
    assert reader.changed_since(before) == []
    await c.report("gpu-01", gpus=4)
    await c.call("POST", "/api/v1/machines/gpu-03/cordon", body={"reason": "fan"})
    reader.reload()
    assert sorted(reader.changed_since(before) or []) == ["gpu-01", "gpu-03"]
    one, three = reader.get("gpu-01"), reader.get("gpu-03")
    assert one is not None
    assert one.report is not None
    assert len(one.report.gpus) == 4
    assert three is not None
    assert three.cordon_reason == "fan"
    opened.close()


async def test_a_machine_gone_from_the_file_is_dropped_by_a_reload(store_cluster: Cluster) -> None:
    """A row deleted from the file (no stamp tells of it) is noticed by the count: the reload
    reads every row again, drops the machine, and says changes cannot be named one by one."""
    c = store_cluster
    for name in ("gpu-01", "gpu-02"):
        await c.report(name)
    opened = Store.open(c.store.database.location)
    reader = MachineRecords(opened)
    before = reader.changes
    with c.store.database.write() as conn:
        conn.execute("DELETE FROM tokens WHERE machine = 'gpu-02'")
        conn.execute("DELETE FROM machines WHERE name = 'gpu-02'")
    reader.reload()
    assert [record.name for record in reader.all()] == ["gpu-01"]
    assert reader.changed_since(before) is None
    opened.close()


async def test_snapshots_kept_up_to_date_equal_fresh_ones(store_cluster: Cluster) -> None:
    """After each of a random sequence of reports, heartbeats, cordons, labels, placements,
    task ends and clock moves, the snapshot kept up to date by machine (in the service and in
    a reader that reloads as the pass worker does) equals one built afresh."""
    c = store_cluster
    await c.workspace("vision")
    names = [f"gpu-0{i}" for i in range(1, 7)]
    for name in names:
        await c.report(name)
    opened = Store.open(c.store.database.location)
    reader = MachineRecords(opened)
    kept, read = Views(), Views()
    rng = random.Random(17)  # noqa: S311 - a test's fixed sequence
    heard = c.clock.now()
    for step in range(60):
        action = rng.choice(["report", "beat", "cordon", "label", "place", "end", "time"])
        name = rng.choice(names)
        if action == "report":
            await c.report(name, gpus=rng.choice([4, 8]))
        elif action == "beat":
            await c.report(name, gpus=_gpus(c, name))
        elif action == "cordon":
            path = f"/api/v1/machines/{name}/" + rng.choice(["cordon", "uncordon"])
            await c.call("POST", path, body={})
        elif action == "label":
            await c.label(name, rack=rng.choice(["r1", "r2"]))
        elif action == "place":
            await c.submit("vision", f"run-{step}", gpus=rng.choice([1, 2]))
            await c.run_pass()
        elif action == "end":
            await _end_one(c)
        else:
            c.clock.advance(rng.choice([1, 10, 25]))
        now = c.clock.now()
        c.records.flush_seen()
        reader.reload()
        for store, records, views in ((c.store, c.records, kept), (opened, reader, read)):
            fresh = build_snapshot(store, records, now, DOWN_AFTER, heard)
            assert (
                step,
                action,
                build_snapshot(store, records, now, DOWN_AFTER, heard, views),
            ) == (
                step,
                action,
                fresh,
            )
    opened.close()


def _gpus(c: Cluster, name: str) -> int:
    record = c.records.get(name)
    return len(record.report.gpus) if record is not None and record.report is not None else 8


async def _end_one(c: Cluster) -> None:
    """The oldest live task runs and succeeds, as its agent reports it."""
    row = c.store.database.read_one(
        "SELECT machine, name FROM tasks WHERE state = 'Assigned' ORDER BY id LIMIT 1"
    )
    if row is None:
        return
    machine, task = row["machine"], row["name"]
    gpus = _gpus(c, machine)
    await c.report(machine, [{"task": task, "state": "Running"}], gpus=gpus)
    await c.report(machine, [{"task": task, "state": "Succeeded", "exit_code": 0}], gpus=gpus)
