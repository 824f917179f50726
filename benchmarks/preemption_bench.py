"""How long a preemption search takes on a full cluster: the median of three runs.

    .venv/bin/python benchmarks/preemption_bench.py [--sizes 1000 5000] [--samples 5]

Clusters of N machines × 8 H100 GPUs (racks of 32, InfiniBand fabrics of 256 machines, an
18-machine NVLink domain in every fabric), every GPU held: each machine runs two 4-GPU runs of
random priority 0 to 9, started at random times in the last day. A priority-1000 run searches
for its victims (`scheduler/preemption.py` `Preemption.plan`): a 1-GPU run, an 8-GPU run (one
machine) and a 64-GPU gang. Each sample is a new `Preemption`, as each pass makes: with
the trials' live state built anew from the snapshot (the first pass), and with the one the
scheduler keeps between passes (`PassState.trials`). The figure also shows how many runs the
plan stops and how many engine trials it took.
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

from astraeus.coordinator.placement import ClusterSnapshot, RunRequest
from astraeus.coordinator.placement.cache import LiveState
from astraeus.coordinator.scheduler.preemption import Preemption
from astraeus.coordinator.store.preemption import LiveRun, LiveTask
from astraeus.coordinator.testing.fake_cluster import gpus, machine, rdma_port, run
from astraeus.shared import RequestedResources
from astraeus.shared.fake_gpu import gpu_uuid

NOW = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
RACK, FABRIC, DOMAIN = 32, 256, 18
RUNS_OF_THREE = 3


def cluster(size: int, seed: int = 7) -> tuple[ClusterSnapshot, list[LiveRun]]:
    """The full cluster, and the runs that fill it."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible cluster, not a secret
    views, runs = [], []
    for i in range(size):
        name = f"gpu-{i:05d}"
        fabric, position = divmod(i, FABRIC)
        domain = f"nvl-{fabric}" if position < DOMAIN else None
        view = machine(
            name,
            gpu_list=gpus(name, 8, nvlink_domain=domain),
            cpu_cores=128,
            memory_gib=2048,
            rack=f"rack-{i // RACK:04d}",
            fabric=f"ib-{fabric}",
            ports=[rdma_port(subnet=f"fe80::{fabric}")],
            used_gpus=range(8),
        )
        report = view.report
        key = report.model_dump_json(exclude={"reported_at"}) if report else None
        views.append(dataclasses.replace(view, report_key=key, workers=()))
        for half in (0, 1):
            ids = tuple(gpu_uuid(name, g) for g in range(4 * half, 4 * half + 4))
            started = NOW - timedelta(seconds=rng.randrange(86_400))
            runs.append(
                LiveRun(
                    seq=2 * i + half,
                    workspace=f"team-{rng.randrange(10)}",
                    name=f"r-{2 * i + half}",
                    priority=rng.randrange(10),
                    preemptible=True,
                    leaving=False,
                    preempted_for=None,
                    started_at=started,
                    tasks=(LiveTask(name, ids, 0.0, 0),),
                )
            )
    return ClusterSnapshot(machines=tuple(views)), runs


def urgent(gpu_count: int) -> RunRequest:
    ask = RequestedResources.model_validate({"gpu_requests": {"count": gpu_count}})
    return run("urgent", workspace="ops", ask=ask)


class Counted(Preemption):
    """A `Preemption` that counts its engine trials."""

    trials = 0

    def _session(self, snapshot: ClusterSnapshot) -> object:  # type: ignore[override]
        Counted.trials += 1
        return super()._session(snapshot)


def sample(
    snapshot: ClusterSnapshot, runs: list[LiveRun], gpu_count: int, live: LiveState | None
) -> tuple[float, int, int]:
    """Seconds for one search, runs stopped, engine trials; `live`: the trials' live state
    kept from the last pass (None: the first pass's, built anew)."""
    Counted.trials = 0
    preemption = Counted(snapshot, runs, budget=6, live=live)
    started = time.perf_counter()
    plan = preemption.plan(urgent(gpu_count), 1000, frozenset(), NOW)
    seconds = time.perf_counter() - started
    assert plan is not None, f"a {gpu_count}-GPU run found no victims"  # noqa: S101
    return seconds, len(plan.victims), Counted.trials


def bench(size: int, samples: int) -> None:
    snapshot, runs = cluster(size)
    kept = LiveState()
    sample(snapshot, runs, 1, kept)  # the live state as the pass before left it
    for gpu_count in (1, 8, 64):
        for label, live in (("first pass", None), ("kept state", kept)):
            figures = []
            for _ in range(RUNS_OF_THREE):
                measured = [sample(snapshot, runs, gpu_count, live) for _ in range(samples)]
                figures.append(statistics.median(m[0] for m in measured) * 1000)
                _, victims, trials = measured[-1]
            shown = ", ".join(f"{f:.0f}" for f in figures)
            print(
                f"{size:>6} machines  {gpu_count:>3}-GPU run, {label}:"
                f" {statistics.median(figures):6.0f} ms ({shown})"
                f"  stops {victims} runs, {trials} engine trials"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--samples", type=int, default=5, help="samples per run of a measure")
    parser.add_argument(
        "--smoke", action="store_true", help="20 machines, one sample (the suite's check)"
    )
    args = parser.parse_args()
    if args.smoke:
        args.sizes, args.samples = [20], 1
    print(f"python {platform.python_version()}, load average {os.getloadavg()[0]:.2f}")
    for size in args.sizes:
        bench(size, args.samples)


if __name__ == "__main__":
    main()
