"""Heartbeats: kept in memory, written in one batch, never setting a newer report back."""

from __future__ import annotations

from .conftest import Cluster
from .fakes import START


def _stored(c: Cluster, machine: str) -> tuple[str, str]:
    row = c.store.database.read(
        "SELECT last_seen, report FROM machines WHERE name = ?", (machine,)
    )[0]
    return row["last_seen"], row["report"]


async def test_a_heartbeat_is_written_at_the_next_flush(fake_cluster: Cluster) -> None:
    """A report with nothing new for placement changes memory at once and the file only when
    heartbeats are flushed (each pass does it first)."""
    c = fake_cluster
    await c.report("gpu-01")
    first, report = _stored(c, "gpu-01")
    c.clock.advance(7)
    await c.report("gpu-01", cpu_cores=96)
    assert _stored(c, "gpu-01") == (first, report)
    record = c.records.get("gpu-01")
    assert record is not None
    assert record.last_seen == c.clock.now()
    assert c.records.flush_seen() == 1
    assert _stored(c, "gpu-01") == (c.clock.now().isoformat(), report)
    assert c.records.flush_seen() == 0


async def test_a_pass_flushes_heartbeats_first(fake_cluster: Cluster) -> None:
    """After a pass, the file has every heartbeat that came before it."""
    c = fake_cluster
    await c.report("gpu-01")
    c.clock.advance(3)
    await c.report("gpu-01")
    await c.run_pass()
    assert _stored(c, "gpu-01")[0] == c.clock.now().isoformat()


async def test_a_flush_never_sets_a_newer_report_back(fake_cluster: Cluster) -> None:
    """A heartbeat kept in memory, then a report that changed (written at once): the flush
    leaves the newer time and report in the file."""
    c = fake_cluster
    await c.report("gpu-01")
    c.clock.advance(1)
    await c.report("gpu-01")
    c.clock.advance(1)
    await c.report("gpu-01", gpus=4)
    written = _stored(c, "gpu-01")
    assert written[0] == c.clock.now().isoformat()
    assert '"index":3' in written[1]
    assert '"index":4' not in written[1]
    assert c.records.flush_seen() == 0
    assert _stored(c, "gpu-01") == written


async def test_memory_keeps_the_newest_volatile_fields(fake_cluster: Cluster) -> None:
    """A heartbeat's time stamp and free counters replace the old ones in memory, and the GPUs
    are the same objects as before (a heartbeat does not rebuild the report)."""
    c = fake_cluster
    await c.report("gpu-01")
    before = c.records.get("gpu-01")
    assert before is not None
    assert before.report is not None
    beat = {
        "reported_at": "2026-10-01T09:00:05+00:00",
        "free_cpu_cores": 12.5,
        "free_memory_bytes": 1024,
    }
    c.clock.advance(5)
    status, _ = await c.call(
        "PUT",
        "/api/v1/machines/gpu-01/report",
        c.agent_token("gpu-01"),
        {"report": {**before.report.model_dump(mode="json"), **beat}},
    )
    assert status == 200
    after = c.records.get("gpu-01")
    assert after is not None
    assert after.report is not None
    assert after.report.reported_at is not None
    assert (after.report.reported_at - START).total_seconds() == 5
    assert (after.report.free_cpu_cores, after.report.free_memory_bytes) == (12.5, 1024)
    assert after.report.gpus[0] is before.report.gpus[0]


async def test_a_flush_may_write_the_oldest_heartbeats_first(fake_cluster: Cluster) -> None:
    """With a limit, a flush writes that many machines' heartbeats, oldest first, and leaves
    the rest for the next one."""
    c = fake_cluster
    for name in ("gpu-01", "gpu-02", "gpu-03"):
        await c.report(name)
    first = _stored(c, "gpu-01")
    c.clock.advance(4)
    for name in ("gpu-02", "gpu-03", "gpu-01"):
        await c.report(name)
    assert c.records.flush_seen(2) == 2
    now = c.clock.now().isoformat()
    assert [_stored(c, n)[0] for n in ("gpu-02", "gpu-03")] == [now, now]
    assert _stored(c, "gpu-01") == first
    assert c.records.flush_seen(2) == 1
    assert _stored(c, "gpu-01")[0] == now
