"""How long a preemption search takes on a full cluster, and a whole pass with every policy on.

    .venv/bin/python benchmarks/preemption_bench.py [--sizes 1000 5000] [--samples 5]
    .venv/bin/python benchmarks/preemption_bench.py --sizes 5000 --pass-only

Clusters of N machines × 8 H100 GPUs (racks of 32, InfiniBand fabrics of 256 machines, an
18-machine NVLink domain in every fabric), every GPU held: each machine runs two 4-GPU runs of
random priority 0 to 9, started at random times in the last day. A priority-1000 run searches
for its victims (`scheduler/preemption.py` `Preemption.plan`): a 1-GPU run, an 8-GPU run (one
machine), a 64-GPU gang, and a 64-GPU gang kept in one NVLink domain (`interconnect: nvlink`)
whose domains' runs are marked `preemptible: false` (it cannot start: the search finds
nothing). Each sample is a new `Preemption`, as each pass makes: with the trials' live state
built anew from the snapshot (the first pass), and with the one the scheduler keeps between
passes (`PassState.trials`). The figure also shows how many runs the plan stops and how many
engine trials it took. Each figure is the median of three runs, each the median of
`--samples`.

The pass: the queue walk (`scheduler/queue_walk.py` `decide`, the real engine, fair-share
order, holds per set of machines and backfill as the pass makes them) over a cluster of N
machines whose first half and every NVLink domain are full as above and whose other machines
are idle, with 10,000 1-GPU runs of priority 0 queued behind 8 priority-1000 gangs of 64 GPUs,
each kept in one NVLink domain, of 8 workspaces: with preemption off, with it on while the
domains' runs may not be stopped (the gangs cannot start: each of the first four searches
finds nothing), and on while they may (four gangs start by preemption). Every 1-GPU run is
placed in each; the figure is the pass's time (median of three).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import random
import statistics
import time
from datetime import UTC, datetime, timedelta

from astraeus.coordinator.placement import ClusterSnapshot, PlacementSession, RunRequest
from astraeus.coordinator.placement.cache import LiveState
from astraeus.coordinator.scheduler.items import QueueItem
from astraeus.coordinator.scheduler.preemption import Preemption
from astraeus.coordinator.scheduler.queue_walk import PassContext, decide
from astraeus.coordinator.store.preemption import LiveRun, LiveTask
from astraeus.coordinator.testing.fake_cluster import gpus, machine, rdma_port, run
from astraeus.shared import RequestedResources
from astraeus.shared.admin import Workspace
from astraeus.shared.fake_gpu import gpu_uuid

NOW = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
RACK, FABRIC, DOMAIN = 32, 256, 18
RUNS_OF_THREE = 3


def cluster(
    size: int, seed: int = 7, *, full: int | None = None, domains_stoppable: bool = True
) -> tuple[ClusterSnapshot, list[LiveRun]]:
    """The cluster, and the runs that fill it: the first `full` machines (every one by
    default) and every NVLink domain's; `domains_stoppable`: the runs in NVLink domains may be
    preempted (else they are `preemptible: false`)."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible cluster, not a secret
    views, runs = [], []
    full = size if full is None else full
    for i in range(size):
        name = f"gpu-{i:05d}"
        fabric, position = divmod(i, FABRIC)
        domain = f"nvl-{fabric}" if position < DOMAIN else None
        held = i < full or domain is not None
        view = machine(
            name,
            gpu_list=gpus(name, 8, nvlink_domain=domain),
            cpu_cores=128,
            memory_gib=2048,
            rack=f"rack-{i // RACK:04d}",
            fabric=f"ib-{fabric}",
            ports=[rdma_port(subnet=f"fe80::{fabric}")],
            used_gpus=range(8) if held else (),
        )
        report = view.report
        key = report.model_dump_json(exclude={"reported_at"}) if report else None
        views.append(dataclasses.replace(view, report_key=key, workers=()))
        for half in (0, 1) if held else ():
            ids = tuple(gpu_uuid(name, g) for g in range(4 * half, 4 * half + 4))
            started = NOW - timedelta(seconds=rng.randrange(86_400))
            runs.append(
                LiveRun(
                    seq=2 * i + half,
                    workspace=f"team-{rng.randrange(10)}",
                    name=f"r-{2 * i + half}",
                    priority=rng.randrange(10),
                    preemptible=domains_stoppable or domain is None,
                    leaving=False,
                    preempted_for=None,
                    started_at=started,
                    tasks=(LiveTask(name, ids, 0.0, 0),),
                )
            )
    return ClusterSnapshot(machines=tuple(views)), runs


def urgent(gpu_count: int, *, nvlink: bool = False, workspace: str = "ops") -> RunRequest:
    ask = RequestedResources.model_validate(
        {"gpu_requests": {"count": gpu_count}}
        | ({"network": {"interconnect": "nvlink"}} if nvlink else {})
    )
    return run("urgent", workspace=workspace, ask=ask)


SEARCHES = (
    ("1-GPU run", 1, False, True),
    ("8-GPU run", 8, False, True),
    ("64-GPU run", 64, False, True),
    ("64-GPU NVLink gang that cannot start", 64, True, False),
)
"""Each search measured: its label, GPUs, kept in an NVLink domain, whether it finds victims
(the last one's cluster has its domains' runs marked not preemptible)."""


class Counted(Preemption):
    """A `Preemption` that counts its engine trials."""

    trials = 0

    def _session(self, snapshot: ClusterSnapshot) -> object:  # type: ignore[override]
        Counted.trials += 1
        return super()._session(snapshot)


def sample(
    snapshot: ClusterSnapshot,
    runs: list[LiveRun],
    request: RunRequest,
    live: LiveState | None,
    *,
    found: bool = True,
) -> tuple[float, int, int]:
    """Seconds for one search, runs stopped, engine trials; `live`: the trials' live state
    kept from the last pass (None: the first pass's, built anew); `found`: it must find
    victims (else: it must find none)."""
    Counted.trials = 0
    preemption = Counted(snapshot, runs, budget=6, live=live)
    started = time.perf_counter()
    plan = preemption.plan(request, 1000, frozenset(), NOW)
    seconds = time.perf_counter() - started
    gpus = request.ask.gpu_count
    assert (plan is not None) == found, f"a {gpus}-GPU run: {plan}"  # noqa: S101
    return seconds, len(plan.victims) if plan else 0, Counted.trials


def bench(size: int, samples: int) -> None:
    clusters = {True: cluster(size), False: cluster(size, domains_stoppable=False)}
    kept = {stoppable: LiveState() for stoppable in clusters}
    for stoppable, (snapshot, runs) in clusters.items():
        sample(snapshot, runs, urgent(1), kept[stoppable])  # as the pass before left it
    for text, gpu_count, nvlink, found in SEARCHES:
        snapshot, runs = clusters[found]
        request = urgent(gpu_count, nvlink=nvlink)
        for label, live in (("first pass", None), ("kept state", kept[found])):
            figures = []
            for _ in range(RUNS_OF_THREE):
                measured = [
                    sample(snapshot, runs, request, live, found=found) for _ in range(samples)
                ]
                figures.append(statistics.median(m[0] for m in measured) * 1000)
                _, victims, trials = measured[-1]
            shown = ", ".join(f"{f:.0f}" for f in figures)
            print(
                f"{size:>6} machines  {text}, {label}:"
                f" {statistics.median(figures):6.0f} ms ({shown})"
                f"  stops {victims} runs, {trials} engine trials, load {os.getloadavg()[0]:.2f}",
                flush=True,
            )


URGENT_GANGS = 8
QUEUED = 10_000


def queue(count: int) -> list[QueueItem]:
    """`URGENT_GANGS` priority-1000 NVLink gangs of 64 GPUs (a workspace each), then `count`
    1-GPU runs of priority 0."""
    gang = urgent(64, nvlink=True).ask
    one = urgent(1).ask
    items = [
        QueueItem(
            seq=1_000_000 + k,
            workspace=f"urgent-{k}",
            run=f"gang-{k}",
            index=0,
            is_array=False,
            priority=1000,
            ask=gang,
            image=None,
            time_limit_seconds=None,
            first_evaluated_at=None,
        )
        for k in range(URGENT_GANGS)
    ]
    items += [
        QueueItem(
            seq=2_000_000 + k,
            workspace="batch",
            run=f"one-{k}",
            index=0,
            is_array=False,
            priority=0,
            ask=one,
            image=None,
            time_limit_seconds=3600,
            first_evaluated_at=None,
        )
        for k in range(count)
    ]
    return items


def one_pass(
    snapshot: ClusterSnapshot,
    runs: list[LiveRun],
    items: list[QueueItem],
    walk: LiveState,
    trials: LiveState,
    *,
    preemption: bool,
) -> tuple[float, int, int]:
    """Seconds for one pass's decisions (the walk's live state and the trials' kept from the
    pass before, as the pass worker keeps them), runs placed, runs to stop."""
    workspaces = {
        name: Workspace(name=name, max_priority=1000, created_at=NOW.isoformat())
        for name in {item.workspace for item in items}
    }
    started = time.perf_counter()
    walk.update(snapshot)
    found = Preemption(snapshot, runs, budget=6, live=trials) if preemption else None
    context = PassContext(workspaces, {}, {}, preemption=found)
    outcome = decide(items, PlacementSession(live=walk), NOW, context)
    seconds = time.perf_counter() - started
    stopped = sum(len(one.victims) for one in outcome.preempting)
    return seconds, len(outcome.placed), stopped


def bench_pass(size: int, queued: int) -> None:
    items = queue(queued)
    for label, preemption, stoppable in (
        ("preemption off", False, False),
        ("preemption on, the gangs cannot start", True, False),
        ("preemption on, four gangs start by preemption", True, True),
    ):
        snapshot, runs = cluster(size, full=size // 2, domains_stoppable=stoppable)
        walk, trials = LiveState(), LiveState()
        one_pass(snapshot, runs, items, walk, trials, preemption=preemption)  # the state kept
        figures = []
        for _ in range(RUNS_OF_THREE):
            seconds, placed, stopped = one_pass(
                snapshot, runs, items, walk, trials, preemption=preemption
            )
            figures.append(seconds * 1000)
        shown = ", ".join(f"{f:.0f}" for f in figures)
        print(
            f"{size:>6} machines  pass, {queued} 1-GPU runs behind {URGENT_GANGS} gangs, {label}:"
            f" {statistics.median(figures):6.0f} ms ({shown})  placed {placed}, stops"
            f" {stopped} runs, load {os.getloadavg()[0]:.2f}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--samples", type=int, default=5, help="samples per run of a measure")
    parser.add_argument(
        "--smoke", action="store_true", help="20 machines, one sample (the suite's check)"
    )
    parser.add_argument("--queued", type=int, default=QUEUED, help="1-GPU runs in the pass")
    parser.add_argument("--pass-only", action="store_true", help="the pass alone")
    parser.add_argument("--skip-pass", action="store_true", help="the searches alone")
    args = parser.parse_args()
    if args.smoke:
        args.sizes, args.samples, args.queued = [20], 1, 200
    print(f"python {platform.python_version()}, load average {os.getloadavg()[0]:.2f}")
    for size in args.sizes:
        if not args.pass_only:
            bench(size, args.samples)
        if not args.skip_pass:
            bench_pass(size, args.queued)


if __name__ == "__main__":
    main()
