"""The gang dry run with its groups judged by class (`placement/group_classes.py`) and machine by
machine (`gang.reference_search`, the search before classes), in one process, turn about, so
both run under the same load: the median of three runs, with the load average.

    .venv/bin/python benchmarks/gang_bench.py [--sizes 5000 20000 50000] [--samples 15]

Two clusters of N machines × 8 GPUs:

- `placement_bench`'s (racks of 32, InfiniBand fabrics of 256 with an 18-machine NVLink domain
  each, 40 % of GPUs in use): its 64-GPU gang lands in an NVLink domain;
- the coordinator benchmark's (`coordinator_rig.machine_report`: idle, racks of 32 by label, no
  RDMA): a 64-GPU gang lands on 8 machines of one rack, every rack holding it alike, so every
  rack ties on room and is scored.

Each sample is what `placement_bench` times for a dry run: the live state brought up to date
from the same snapshot (views reused), a session, and `place`; for the run no machine can take,
also its explanation grouped by reason and written as JSON.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
from collections.abc import Callable

from placement_bench import GANG, NOW, UNPLACEABLE, Reused, _dry, _load, cluster, median_ms

from astraeus.coordinator.placement import (
    ClusterSnapshot,
    Pending,
    Placement,
    PlacementSession,
    gang,
    survivors,
)
from astraeus.coordinator.placement.cache.live import LiveState
from astraeus.coordinator.testing.fake_cluster import gpus, machine, run

PLAIN_GANG: dict[str, object] = {"gpu_requests": {"count": 64}}
"""The coordinator benchmark's gang: 64 GPUs, nothing else asked."""
NEVER: dict[str, object] = {"gpu_requests": {"count": 16, "min_per_machine": 16}}
"""The coordinator benchmark's run no machine can take (16 GPUs on one machine of 8)."""

SEARCHES: dict[str, tuple[Callable[..., object], Callable[..., object]]] = {
    "by class": (gang.search, survivors._eligible),
    "machine by machine": (gang.reference_search, survivors.eligible_by_machine),
}
"""The gang search, and the machines no filter rejects as a waiting run's explanation counts
them (by site), each way."""


def use(way: str) -> None:
    gang.search, survivors._eligible = SEARCHES[way]  # type: ignore[assignment]


def idle_racks(size: int) -> ClusterSnapshot:
    """The coordinator benchmark's machines: idle, 8 GPUs, 128 cores, 2 TiB, racks of 32."""
    return ClusterSnapshot(
        machines=tuple(
            machine(
                f"gpu-{i:05}",
                gpu_list=gpus(f"gpu-{i:05}", 8),
                cpu_cores=128,
                memory_gib=2048,
                rack=f"rack-{i // 32}",
            )
            for i in range(size)
        )
    )


def answer(live: LiveState, ask: dict[str, object]) -> object:
    result = PlacementSession(live=live).place(run("dry", ask=ask), NOW)
    if isinstance(result, Placement):
        return (result.landing, result.workers)
    return result


def bench(
    name: str,
    snapshot: ClusterSnapshot,
    asks: list[tuple[str, dict[str, object], type]],
    samples: int,
) -> None:
    print(f"\n{name}, {len(snapshot.machines):,} machines (load average {_load()})")
    live = LiveState()
    live.update(snapshot)
    fresh = Reused(snapshot)
    gc.collect()
    gc.freeze()
    for label, ask, want in asks:
        answers = []
        for way in SEARCHES:
            use(way)
            answers.append(answer(live, ask))
        if answers[0] != answers[1]:
            raise SystemExit(f"{label}: the searches disagree: {answers}")
        figures: dict[str, list[float]] = {way: [] for way in SEARCHES}
        for _ in range(3):
            for way in SEARCHES:
                use(way)
                figures[way].append(
                    median_ms(lambda a=ask, w=want: _dry(live, fresh, a, w), samples)
                )
        use("by class")
        for way, runs in figures.items():
            shown = ", ".join(f"{figure:.2f}" for figure in runs)
            print(
                f"  {label:40} {way:18} median {statistics.median(runs):8.2f} ms"
                f"   (runs: {shown}; load {_load()})"
            )
    gc.unfreeze()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", type=int, nargs="+", default=[5000, 20000])
    parser.add_argument("--samples", type=int, default=15, help="samples per run of a measure")
    parser.add_argument(
        "--smoke", action="store_true", help="a tiny size: that it runs (the suite's smoke test)"
    )
    args = parser.parse_args()
    if args.smoke:
        args.sizes, args.samples = [64], 2
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores")
    print(f"load average at start: {_load()}")
    for size in args.sizes:
        bench(
            "coordinator benchmark's cluster (idle, racks of 32)",
            idle_racks(size),
            [
                ("64-GPU gang dry run", PLAIN_GANG, Placement),
                ("unplaceable (16 GPUs on one), grouped", NEVER, Pending),
            ],
            args.samples,
        )
        bench(
            "placement_bench's cluster",
            cluster(size),
            [
                ("64-GPU gang dry run", GANG, Placement),
                ("unplaceable dry run, grouped explanation", UNPLACEABLE, Pending),
            ],
            args.samples,
        )
    print(f"\nload average at end: {_load()}")


if __name__ == "__main__":
    main()
