"""Placement engine speed on synthetic clusters: the median of three runs, with the load average.

    .venv/bin/python benchmarks/placement_bench.py [--sizes 1000 5000 20000] [--samples 30]

Clusters of N machines × 8 H100 GPUs: racks of 32, InfiniBand fabrics of 256 machines, an
18-machine NVLink domain in every fabric, 40 % of GPUs in use, 1 % at risk, 0.2 % faulted; each
machine carries a report key as the store's snapshot does. The engine keeps a live state
between passes (`placement/cache/live.py`); every measure below starts from a new snapshot of
the same cluster, so it includes bringing the live state up to date. The update is timed twice:
with every view a new object of equal content (each machine compared field by field), and with
the views reused (what the coordinator's snapshot gives for unchanged machines); the others
reuse views:

- dry runs (1-GPU, 64-GPU gang, a run no machine can take): update + session + `place`, and for
  the last the explanation grouped by reason and written as JSON (`explain=grouped`);
- a scheduler pass over 1,000 waiting runs of one ask no machine can take (update + session +
  the queue's decisions + their explanations in the guide's form), and the next pass with no
  change since (update + the memo's check, `scheduler/memo.py`: nothing is decided again);
- a pass whose first run waits only for room (the head: 8 GPUs on one machine, then a 64-GPU
  gang), with 1,000 runs asking the same behind it, on the same machines with at least one GPU
  in use each, every machine freeing up at its own moment (its tasks' time limits, drawn between
  10 minutes and 7 days): the head looks for the machines that free up first
  (`queue_walk._Walk._earliest`); beside it the same pass with no time limit known, where it
  holds its idle fit without a search;
- runs placed per second: `--queued` 1-GPU runs placed and taken one after another in one
  session (sizes of at least 5,000 machines; the engine's share of the coordinator's figure).

Each run of a measure is the median of `--samples` samples; the figure is the median of three
runs, printed with all three. The script calls `gc.freeze()` once the live state is built, as
the scheduler does.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import platform
import random
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from astraeus.coordinator.placement import (
    ClusterSnapshot,
    MachineSnapshot,
    Pending,
    Placement,
    PlacementSession,
)
from astraeus.coordinator.placement.cache import LiveState
from astraeus.coordinator.scheduler.items import QueueItem
from astraeus.coordinator.scheduler.memo import PassMemo
from astraeus.coordinator.scheduler.queue_walk import PassContext, decide, make_explanations
from astraeus.coordinator.store.queue import Usage
from astraeus.coordinator.testing.fake_cluster import gpus, machine, rdma_port, run
from astraeus.shared import RequestedResources
from astraeus.shared.reasons import ReasonKind

NOW = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
GIB = 1024**3
RACK, FABRIC, DOMAIN = 32, 256, 18
RUNS_OF_THREE = 3

ONE_GPU: dict[str, object] = {
    "gpu_requests": {"count": 1},
    "per_gpu": {"cpu_cores": 8, "memory_bytes": 64 * GIB},
}
GANG: dict[str, object] = {
    "gpu_requests": {"count": 64},
    "per_gpu": {"cpu_cores": 8, "memory_bytes": 64 * GIB},
}
UNPLACEABLE: dict[str, object] = {
    "gpu_requests": {"count": 512, "min_per_machine": 8},
    "per_gpu": {"cpu_cores": 8, "memory_bytes": 64 * GIB},
    "topology": {"keep_within": "fabric"},
}


HEAD_ONE: dict[str, object] = {"gpu_requests": {"count": 8}, "machines": 1}
HEAD_GANG: dict[str, object] = {"gpu_requests": {"count": 64, "min_per_machine": 8}}


def cluster(size: int, seed: int = 7, *, busy: bool = False) -> ClusterSnapshot:
    """The cluster; `busy`: every machine with at least one GPU in use."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible cluster, not a secret
    return ClusterSnapshot(machines=tuple(_machine(i, rng, busy) for i in range(size)))


def _machine(i: int, rng: random.Random, busy: bool = False) -> MachineSnapshot:
    name = f"gpu-{i:05d}"
    fabric, position = divmod(i, FABRIC)
    domain = f"nvl-{fabric}" if position < DOMAIN else None
    at_risk = [g for g in range(8) if rng.random() < 0.01]
    faulted = [g for g in range(8) if rng.random() < 0.002 and g not in at_risk]
    used = [g for g in range(8) if rng.random() < 0.4 and g not in faulted]
    if busy and not used:
        used = [next(g for g in range(8) if g not in faulted)]
    view = machine(
        name,
        gpu_list=gpus(name, 8, at_risk=at_risk, faulted=faulted, nvlink_domain=domain),
        cpu_cores=128,
        memory_gib=2048,
        rack=f"rack-{i // RACK:04d}",
        fabric=f"ib-{fabric}",
        ports=[rdma_port(subnet=f"fe80::{fabric}")],
        used_gpus=used,
        used_cores=8 * len(used),
        used_memory_gib=64 * len(used),
    )
    report = view.report
    key = report.model_dump_json(exclude={"reported_at"}) if report else None
    return dataclasses.replace(view, report_key=key)


def again(snapshot: ClusterSnapshot) -> ClusterSnapshot:
    """The same cluster as new objects: what the next pass reads when nothing changed (the
    store keeps each parsed report; views, sets and keys are new)."""
    return ClusterSnapshot(
        machines=tuple(
            dataclasses.replace(
                view,
                used_gpu_ids=frozenset(view.used_gpu_ids),
                report_key="".join(view.report_key or ""),
            )
            for view in snapshot.machines
        )
    )


class Fresh:
    """Two equal snapshots of the cluster as separate objects, handed out in turn: every
    update compares each machine anew, as a pass reading the store does."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self._pair, self._turn = (again(snapshot), again(snapshot)), 0

    def __call__(self) -> ClusterSnapshot:
        self._turn ^= 1
        return self._pair[self._turn]


class Reused(Fresh):
    """The same cluster as the coordinator's snapshot gives it when nothing changed: a new
    tuple of the same view objects (`scheduler.snapshot.Views` reuses unchanged views)."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        super().__init__(snapshot)
        self._pair = (snapshot, snapshot)

    def __call__(self) -> ClusterSnapshot:
        return ClusterSnapshot(machines=tuple(super().__call__().machines))


def median_ms(action: Callable[[], object], samples: int) -> float:
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        action()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def queue(count: int, ask: dict[str, object]) -> list[QueueItem]:
    parsed = RequestedResources.model_validate(ask)
    return [
        QueueItem(
            seq=n,
            workspace="vision",
            run=f"run-{n}",
            index=0,
            is_array=False,
            priority=0,
            ask=parsed,
            image=None,
            time_limit_seconds=None,
            first_evaluated_at=NOW,
        )
        for n in range(count)
    ]


def engine_pass(live: LiveState, memo: PassMemo, fresh: Fresh, waiting: list[QueueItem]) -> None:
    """The engine's share of a scheduler pass, as the pass worker runs it: bring the live
    state up to date, then decide the queue unless nothing changed since the last pass, and
    make the waiting runs' explanations in the guide's form (what the service stores)."""
    live.update(fresh())
    context = PassContext({}, {}, {})
    key = memo.key(live, waiting, (), context)
    if memo.unchanged(key):
        return
    decisions = decide(waiting, PlacementSession(live=live), NOW, context)
    if decisions.placed or len(decisions.waiting) != len(waiting):
        raise SystemExit("the pass placed something")
    make_explanations(decisions)
    memo.remember(key, decisions, False)


def head_pass(size: int, ask: dict[str, object], samples: int, limits: bool) -> float:
    """One pass (ms) whose head waits only for room, 1,000 runs of the same ask behind it, on a
    cluster where every machine has a GPU in use; with `limits`, each machine's tasks reach
    their time limits at a moment of its own."""
    snapshot = cluster(size, busy=True)
    live = LiveState()
    live.update(snapshot)
    rng = random.Random(11)  # noqa: S311 - reproducible moments, not a secret
    usage = {
        view.name: Usage(limit_ends=NOW + timedelta(minutes=rng.randint(10, 7 * 24 * 60)))
        for view in snapshot.machines
        if limits
    }
    context = PassContext({}, {}, {}, usage=usage)
    waiting = queue(1001, ask)

    def one() -> None:
        decisions = decide(waiting, PlacementSession(live=live), NOW, context)
        head = decisions.waiting[0]
        if decisions.placed or head.kind is not ReasonKind.NEXT_TO_RUN:
            raise SystemExit(f"no head waited for room: {head.reason}")
        if limits and "expected to start by" not in head.reason:
            raise SystemExit(f"the head expects no start: {head.reason}")

    return median_ms(one, samples)


def placed_per_second(snapshot: ClusterSnapshot, queued: int) -> float:
    live = LiveState()
    live.update(snapshot)
    session = PlacementSession(live=live)
    requests = [run(f"one-gpu-{n}", ask=ONE_GPU) for n in range(queued)]
    start = time.perf_counter()
    for request in requests:
        result = session.place(request, NOW)
        if not isinstance(result, Placement):
            raise SystemExit(f"{request.name} did not fit: {result.headline}")
        session.take(result)
    return queued / (time.perf_counter() - start)


def three(label: str, unit: str, measure: Callable[[], float]) -> None:
    figures = [measure() for _ in range(RUNS_OF_THREE)]
    shown = ", ".join(f"{figure:,.2f}" for figure in figures)
    print(f"  {label:44} median {statistics.median(figures):9,.2f} {unit}   (runs: {shown})")


def bench(size: int, samples: int, queued: int) -> None:
    print(f"\n{size:,} machines (load average {_load()})")
    snapshot = cluster(size)
    fresh = Fresh(snapshot)
    live = LiveState()
    start = time.perf_counter()
    live.update(snapshot)
    print(f"  live state built from nothing: {(time.perf_counter() - start) * 1000:.0f} ms")
    gc.collect()
    gc.freeze()
    three(
        "update, nothing changed, new view objects",
        "ms",
        lambda: median_ms(lambda: live.update(fresh()), samples),
    )
    fresh = Reused(snapshot)
    live.update(fresh())
    three(
        "update, nothing changed, views reused",
        "ms",
        lambda: median_ms(lambda: live.update(fresh()), samples),
    )
    for label, ask, want in (
        ("1-GPU dry run", ONE_GPU, Placement),
        ("64-GPU gang dry run", GANG, Placement),
        ("unplaceable dry run, grouped explanation", UNPLACEABLE, Pending),
    ):
        three(
            label, "ms", lambda a=ask, w=want: median_ms(lambda: _dry(live, fresh, a, w), samples)
        )
    waiting = queue(1000, UNPLACEABLE)
    three(
        "pass deciding 1,000 waiting runs (one ask)",
        "ms",
        lambda: median_ms(lambda: engine_pass(live, PassMemo(), fresh, waiting), 3),
    )
    memo = PassMemo()
    engine_pass(live, memo, fresh, waiting)
    three(
        "pass with no change since (1,000 waiting)",
        "ms",
        lambda: median_ms(lambda: engine_pass(live, memo, fresh, waiting), samples),
    )
    for label, ask in (("8-GPU head", HEAD_ONE), ("64-GPU gang head", HEAD_GANG)):
        for limits, how in ((True, "frees up first"), (False, "no limit known")):
            three(
                f"pass, {label}, {how}",
                "ms",
                lambda a=ask, k=limits: head_pass(size, a, max(3, samples // 10), k),
            )
    if size >= 5000:
        three(
            f"1-GPU runs placed, {queued:,} queued",
            "runs/s",
            lambda: placed_per_second(fresh(), queued),
        )
    gc.unfreeze()


def _dry(live: LiveState, fresh: Fresh, ask: dict[str, object], want: type) -> None:
    live.update(fresh())
    result = PlacementSession(live=live).place(run("dry", ask=ask), NOW)
    if not isinstance(result, want):
        raise SystemExit(f"expected a {want.__name__}, got {result}")
    if isinstance(result, Pending):
        result.explained.grouped().model_dump_json()


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--samples", type=int, default=30, help="samples per run of a measure")
    parser.add_argument("--queued", type=int, default=10_000, help="1-GPU runs for the rate")
    parser.add_argument(
        "--smoke", action="store_true", help="a tiny size: that it runs (the suite's smoke test)"
    )
    args = parser.parse_args()
    if args.smoke:
        args.sizes, args.samples, args.queued = [20], 2, 20
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores")
    print(f"load average at start: {_load()}")
    for size in args.sizes:
        bench(size, args.samples, args.queued)
    print(f"\nload average at end: {_load()}")


if __name__ == "__main__":
    main()
