"""One pass function: the pass worker process and the service's own thread decide the same file
alike, through `compute_pass`; and one garbage-collector policy serves them both."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from astraeus.coordinator.api import SCHEDULER
from astraeus.coordinator.scheduler import loop, pass_worker
from astraeus.coordinator.scheduler.compute import PassInputs, PassState, compute_pass
from astraeus.coordinator.scheduler.gc_policy import GcPolicy
from astraeus.coordinator.scheduler.pass_rows import as_rows
from astraeus.coordinator.scheduler.pass_worker import worker_pass
from astraeus.shared import labels

from .conftest import Cluster
from .test_reshape import R1, _spread_over_ethernet

SCHEDULER_DIR = Path(loop.__file__).resolve().parent


async def test_the_worker_process_and_the_service_decide_the_same_file_alike(
    cluster: Cluster,
) -> None:
    """Over one file: a reshape, placements, the queue's head, runs waiting for room, runs too
    big for the workspace (two sharing one explanation) and for their workspace's quota. The
    pass computed in a spawned worker process and the pass computed in this process with the
    service's own store give the same rows, in the same order."""
    c = cluster
    await _spread_over_ethernet(c)  # `pretrain` over Ethernet on a1 and b1; a2 runs `blocker`
    await c.report("a2", [{"task": "blocker-0", "state": "Succeeded", "exit_code": 0}], labels=R1)
    await c.report("c1", labels={labels.RACK: "r3"}, gpus=4)
    await c.workspace("audio", gpu_quota=2)
    await c.submit("vision", "fits", gpus=2)
    for name in ("huge-a", "huge-b"):
        await c.submit("vision", name, gpus=64)
    await c.submit("vision", "next", gpus=24)
    await c.submit("vision", "behind", gpus=2)
    await c.submit("audio", "over-quota", gpus=4)
    await c.submit("audio", "small", gpus=1)
    c.records.flush_seen()  # the worker reads who is Up from the file, as a pass does
    now = c.clock.now()
    inputs = PassInputs(now, c.client.app[SCHEDULER].down_after, now, 500, 5.0)
    pool = loop.worker_pool()
    try:
        db = c.store.database.location
        elsewhere, cut = pool.submit(worker_pass, db, inputs).result(timeout=60)
    finally:
        pool.shutdown()
    here, cut_here = compute_pass(PassState(c.store, c.records), inputs)
    assert (as_rows(here), cut_here) == (elsewhere, cut)
    assert [r.old.row.run for r in elsewhere.reshaped] == ["pretrain"]
    assert [row.run for row in elsewhere.placed] == ["fits", "behind"]
    waiting = {row.run: row for row in elsewhere.waiting}
    assert {run: row.kind for run, row in waiting.items()} == {
        "next": "NextToRun",
        "huge-a": "ClusterTooSmall",
        "huge-b": "ClusterTooSmall",
        "over-quota": "WaitsForQuota",
        "small": "NoMachineFits",
    }
    assert waiting["huge-a"].explanation is waiting["huge-b"].explanation is not None


async def test_a_pass_with_nothing_changed_decides_nothing_in_either_path(
    cluster: Cluster,
) -> None:
    """The memo is the same in both: after a pass that changed nothing and was committed,
    the same inputs decide nothing, here and in the worker's code alike."""
    c = cluster
    await c.workspace("vision")
    await c.report("gpu-01")
    await c.submit("vision", "huge", gpus=16)
    c.records.flush_seen()
    now = c.clock.now()
    inputs = PassInputs(now, c.client.app[SCHEDULER].down_after, now, 500, 5.0)
    state = PassState(c.store, c.records)
    first, _ = compute_pass(state, inputs)
    assert [w.item.run for w in first.waiting] == ["huge"]
    again, _ = compute_pass(state, replace(inputs, last_committed=True))
    assert (again.placed, again.waiting) == ([], [])
    db = c.store.database.location
    first_rows, _ = worker_pass(db, inputs)
    assert first_rows == as_rows(first)
    again_rows, _ = worker_pass(db, replace(inputs, last_committed=True))
    assert (again_rows.placed, again_rows.waiting) == ([], [])


async def test_the_worker_built_at_start_decides_its_first_pass_as_a_cold_one(
    cluster: Cluster,
) -> None:
    """`worker_warm` (asked by the service at its start) reads the machines and builds the
    worker's live state; the first pass after it builds again only a machine changed in
    between, and decides what a pass over the same file without it decides."""
    c = cluster
    await c.workspace("vision")
    for name in ("gpu-01", "gpu-02", "gpu-03"):
        await c.report(name)
    c.records.flush_seen()
    db = c.store.database.location
    now = c.clock.now()
    inputs = PassInputs(now, c.client.app[SCHEDULER].down_after, now, 500, 5.0)
    pass_worker.worker_warm(db, inputs)
    live = pass_worker._OPEN[db].live
    assert live is not None
    assert sorted(facts.name for facts in live.frame.facts) == ["gpu-01", "gpu-02", "gpu-03"]
    await c.report("gpu-03", gpus=4)  # a machine changed after the start
    await c.submit("vision", "fits", gpus=8)
    await c.submit("vision", "small", gpus=4)
    c.records.flush_seen()
    warmed, _ = worker_pass(db, inputs)
    assert live.rebuilt == 1  # gpu-03: the others' facts were built at the start
    cold, _ = compute_pass(PassState(c.store, c.records), inputs)
    assert warmed == as_rows(cold)
    assert sorted(row.run for row in warmed.placed) == ["fits", "small"]


class _AskedError(Exception):
    """The pass worker was asked for a pass."""


class _Watched(ProcessPoolExecutor):
    """A pass worker that starts no process: it counts what it is asked, and refuses it."""

    asked = 0

    def submit(self, *args: Any, **kwargs: Any) -> Any:
        self.asked += 1
        raise _AskedError


class _Building(NamedTuple):
    worker: _Watched
    build: Future[None]
    """The worker's build at start (`warm_worker`): under way until a test ends it."""


@pytest.fixture
def building(cluster: Cluster) -> Iterator[_Building]:
    """The service's scheduler with a pass worker still building, as right after a start."""
    scheduler = cluster.client.app[SCHEDULER]
    worker = _Watched(max_workers=1)
    build: Future[None] = Future()
    loop._WARMING[worker] = build
    scheduler._pool = worker
    yield _Building(worker, build)
    scheduler._pool = None
    worker.shutdown()


async def test_passes_compute_here_while_the_worker_still_builds(
    cluster: Cluster, building: _Building
) -> None:
    """At start the pass worker reads every machine again (`warm_worker`); until it has, a pass
    computes in the service's process, which has built its own state, so the first runs are
    placed once the service listens, not once the worker is done (~5 s later at 50,000
    machines). Once the worker has built, passes go to it."""
    c = cluster
    scheduler = c.client.app[SCHEDULER]
    await c.workspace("vision")
    await c.report("gpu-01")
    await c.submit("vision", "first", gpus=4)
    result = await scheduler.run_pass()
    assert (result.placed, building.worker.asked) == (1, 0)
    building.build.set_result(None)
    await c.submit("vision", "second", gpus=4)
    with pytest.raises(_AskedError):
        await scheduler.run_pass()
    assert building.worker.asked == 1


async def test_a_deep_queue_waits_for_the_worker_even_while_it_builds(
    cluster: Cluster, building: _Building, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass over more than `SHORT_QUEUE` pending runs is not computed in the service while
    the worker builds: placing thousands of runs there held reports up (~0.9 s at 5,000
    machines); it waits for the worker, as every pass did before."""
    c = cluster
    monkeypatch.setattr(loop, "SHORT_QUEUE", 1)
    await c.workspace("vision")
    await c.report("gpu-01")
    await c.submit("vision", "first", gpus=1)
    await c.submit("vision", "second", gpus=1)
    with pytest.raises(_AskedError):
        await c.client.app[SCHEDULER].run_pass()
    assert building.worker.asked == 1


def _gc_calls(path: Path) -> list[str]:
    """`gc.<name>(...)` calls in `path`, and assignments to `GROWTH`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "gc"
        ):
            found.append(f"gc.{node.func.attr}")
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        found += ["GROWTH =" for t in targets if isinstance(t, ast.Name) and t.id == "GROWTH"]
    return found


def test_one_gc_policy_serves_the_loop_and_the_worker() -> None:
    """Of the scheduler's modules, only `gc_policy.py` freezes, unfreezes, collects or turns
    the automatic collections off, and `GROWTH` is defined there alone; the service's loop and
    the pass worker each keep a `GcPolicy`."""
    found = {
        path.name: calls
        for path in sorted(SCHEDULER_DIR.glob("*.py"))
        if (calls := _gc_calls(path))
    }
    assert {name: sorted(calls) for name, calls in found.items()} == {
        "gc_policy.py": [
            "GROWTH =",
            "gc.collect",
            "gc.collect",
            "gc.disable",
            "gc.freeze",
            "gc.unfreeze",
        ],
    }
    assert isinstance(pass_worker._GC, GcPolicy)


async def test_the_services_loop_keeps_a_gc_policy(fake_cluster: Cluster) -> None:
    assert isinstance(fake_cluster.client.app[SCHEDULER]._gc, GcPolicy)
