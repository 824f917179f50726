"""Placement engine speed on synthetic clusters: median and p99 per decision.

    .venv/bin/python benchmarks/placement_bench.py [--machines 1000 5000] [--repeat 200]

Clusters of N machines × 8 H100 GPUs: racks of 32, InfiniBand fabrics of 256 machines, an
18-machine NVLink domain in every fabric, 40 % of GPUs in use, 1 % at risk, 0.2 % faulted.
Each decision is `PlacementSession.place` on a session built once for the pass (what the
scheduler does); building the session is timed on its own, and so is the first decision of a
kind on a fresh session (cold: nothing cached yet). After building each snapshot the script
calls `gc.freeze()` (`--no-freeze` to skip it): see docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial

from astraeus.coordinator.placement import (
    ClusterSnapshot,
    MachineView,
    Pending,
    Placement,
    PlacementSession,
    RunRequest,
)
from astraeus.coordinator.placement.fake_cluster import gpus, machine, rdma_port, run

NOW = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
GIB = 1024**3
RACK, FABRIC, DOMAIN = 32, 256, 18

RUNS: dict[str, dict[str, object]] = {
    "1-GPU run": {
        "gpu_requests": {"count": 1},
        "per_gpu": {"cpu_cores": 8, "memory_bytes": 64 * GIB},
    },
    "8-GPU one-machine run": {
        "gpu_requests": {"count": 8, "min_per_machine": 8},
        "per_gpu": {"cpu_cores": 8, "memory_bytes": 64 * GIB},
    },
    "64-GPU gang, automatic shape": {
        "gpu_requests": {"count": 64},
        "per_gpu": {"cpu_cores": 8, "memory_bytes": 64 * GIB},
    },
    "256-GPU gang within a fabric": {
        "gpu_requests": {"count": 256},
        "per_gpu": {"cpu_cores": 8, "memory_bytes": 64 * GIB},
        "topology": {"keep_within": "fabric"},
    },
    "unplaceable, full explanation": {
        "gpu_requests": {"count": 512, "min_per_machine": 8},
        "per_gpu": {"cpu_cores": 8, "memory_bytes": 64 * GIB},
        "topology": {"keep_within": "fabric"},
    },
}
EXPECT: dict[str, type[object]] = {
    "1-GPU run": Placement,
    "8-GPU one-machine run": Placement,
    "64-GPU gang, automatic shape": Placement,
    "256-GPU gang within a fabric": Placement,
    "unplaceable, full explanation": Pending,
}


def cluster(size: int, seed: int = 7) -> ClusterSnapshot:
    rng = random.Random(seed)  # noqa: S311 - a reproducible cluster, not a secret
    return ClusterSnapshot(machines=tuple(_machine(i, rng) for i in range(size)))


def _machine(i: int, rng: random.Random) -> MachineView:
    name = f"gpu-{i:05d}"
    fabric, position = divmod(i, FABRIC)
    domain = f"nvl-{fabric}" if position < DOMAIN else None
    at_risk = [g for g in range(8) if rng.random() < 0.01]
    faulted = [g for g in range(8) if rng.random() < 0.002 and g not in at_risk]
    used = [g for g in range(8) if rng.random() < 0.4 and g not in faulted]
    return machine(
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


def timed(decide: Callable[[], object], repeat: int) -> tuple[list[float], object]:
    samples, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = decide()
        samples.append((time.perf_counter() - start) * 1000)
    return samples, result


def p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def _fresh(snapshot: ClusterSnapshot, request: RunRequest) -> object:
    return PlacementSession(snapshot).place(request, NOW)


def bench(size: int, repeat: int, freeze: bool) -> dict[str, float]:
    snapshot = cluster(size)
    if freeze:
        # The snapshot is hundreds of thousands of long-lived objects; without this every
        # full collection walks them all, and that, not the engine, dominates the figures.
        gc.collect()
        gc.freeze()
    build, _ = timed(lambda: PlacementSession(snapshot), 5)
    print(f"\n{size} machines: session build median {statistics.median(build):.1f} ms")
    medians: dict[str, float] = {}
    for label, ask in RUNS.items():
        request: RunRequest = run(label.split(",")[0].replace(" ", "-").lower(), ask=ask)
        cold, _ = timed(partial(_fresh, snapshot, request), 1)
        session = PlacementSession(snapshot)
        count = repeat if "GPU run" in label or "one-machine" in label else max(repeat // 10, 20)
        samples, result = timed(partial(session.place, request, NOW), count)
        if not isinstance(result, EXPECT[label]):
            raise SystemExit(f"{label}: expected a {EXPECT[label].__name__}, got {result}")
        medians[label] = statistics.median(samples)
        print(
            f"  {label:32} median {medians[label]:7.2f} ms   p99 {p99(samples):7.2f} ms"
            f"   (first on a fresh session, incl. build: {cold[0]:.1f} ms; {count} runs)"
        )
    gc.unfreeze()
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--machines", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument(
        "--no-freeze", action="store_true", help="leave the snapshot to the garbage collector"
    )
    args = parser.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores")
    print("gc.freeze() after building each snapshot:", "no" if args.no_freeze else "yes")
    results = {size: bench(size, args.repeat, not args.no_freeze) for size in args.machines}
    if len(args.machines) == 2:
        small, large = (results[size] for size in args.machines)
        print(f"\nratio {args.machines[1]}/{args.machines[0]} (medians):")
        for label in RUNS:
            print(f"  {label:32} {large[label] / small[label]:5.2f}")


if __name__ == "__main__":
    main()
