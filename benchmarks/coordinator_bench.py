"""Coordinator benchmark: throughput with a deep queue, report latency while placing, memory,
submission to placed, dry runs over HTTP and from the CLI; Slurm's figures beside them when
`slurmctld` is installed (`slurm_peer.py`).

    .venv/bin/python benchmarks/coordinator_bench.py                     # everything
    .venv/bin/python benchmarks/coordinator_bench.py --sizes 1000,5000 --skip-throughput
    .venv/bin/python benchmarks/coordinator_bench.py --repeat 1 --sizes 500 --queued 1000
    .venv/bin/python benchmarks/coordinator_bench.py --sizes 5000 --store both
    .venv/bin/python benchmarks/coordinator_bench.py --sizes 50000 --skip-throughput \
        --start-only --idle-queued 10000 --start-seconds 120   # issue 29's memory figure

Every figure is the median of `--repeat` runs (three by default), each on a fresh coordinator
process over a copy of the same database, printed with the load average it ran under. The
coordinator and this script (the agents and users) share the machine, so the figures include
the load generator's cost.

`--store postgresql` keeps each coordinator's state in a PostgreSQL database of a private server
started for the run (`tests/pg_server.py`: Debian's initdb, loopback, fsync off) instead of the
SQLite file; `--store both` measures each figure on SQLite, then on PostgreSQL, and ends with
the issue-17 figures of both side by side (at `--machines`, which should be one of `--sizes`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from coordinator_rig import (
    ASTRA,
    GANG,
    NEVER,
    ONE_GPU,
    Cluster,
    Coordinator,
    load,
    percentile,
    three,
)
from coordinator_rig import report_load as reports_at
from slurm_peer import SlurmPeer

MB = 1024 * 1024

START = {
    "start": ("start to /healthz", "s"),
    "first_placed": ("start to first placement (a run submitted at /healthz)", "s"),
    "first_dry": ("first 1-GPU dry run after start, over HTTP", "ms"),
    "rss_service": ("resident memory, service, after the first placement", "MB"),
    "rss_worker": ("resident memory, pass worker, after the first placement", "MB"),
}
"""The figures of a start, measured in every idle run (`first_after_start`)."""

STORES = ("sqlite", "postgresql")


async def throughput(cluster: Cluster, queued: int, rate: float, window: float) -> dict[str, float]:
    """One run: the queue stored before the start, reports at `rate`/s from the start; runs
    placed and committed per second until the queue is empty, the reports' p99 meanwhile, and
    the resident memory at its highest."""
    async with Coordinator(cluster) as c:
        stop = asyncio.Event()
        reports = asyncio.create_task(reports_at(c, rate, stop))
        started = time.perf_counter()
        before = c.placed()
        placed, last, rss = before, started, {"service": 0, "worker": 0}
        while time.perf_counter() - started < window and placed < queued:
            await asyncio.sleep(0.1)
            now = c.placed()
            if now > placed:
                placed, last = now, time.perf_counter()
            for part, size in c.rss().items():
                rss[part] = max(rss[part], size)
        stop.set()
        latencies = await reports
    busy = max(last - started, 1e-9)
    placing = [latency for at, latency in latencies if started <= at <= last] or [
        latency for _, latency in latencies
    ]
    print(
        f"    {before} placed before the first measure, {placed - before} more in {busy:.1f} s;"
        f" {len(latencies)} reports, {len(placing)} while placing: p50"
        f" {percentile(placing, 0.5) * 1000:.1f} ms, p99 {percentile(placing, 0.99) * 1000:.1f}"
        f" ms; RSS service {rss['service'] / MB:.0f} MB, pass worker"
        f" {rss['worker'] / MB:.0f} MB",
        flush=True,
    )
    return {
        "rate": (placed - before) / busy,
        "p99": percentile(placing, 0.99) * 1000,
        "rss": rss["service"] / MB,
        "worker": rss["worker"] / MB,
    }


async def deep_queue(
    machines: int, queued: int, rate: float, window: float, repeat: int, server: Any = None
) -> dict[str, float]:
    """The deep-queue figures, printed; their medians returned (rate, p99, RSS)."""
    store = "sqlite" if server is None else "postgresql"
    print(f"== {queued} 1-GPU runs queued at {machines} machines, reports at {rate:.0f}/s, {store}")
    cluster = Cluster(machines, queued=queued, server=server)
    runs: list[dict[str, float]] = []

    async def once(_: int) -> float:
        runs.append(await throughput(cluster, queued, rate, window))
        return runs[-1]["rate"]

    try:
        medians = {"rate": await three("runs placed and committed", "/s", repeat, once)}
    finally:
        cluster.remove()
    for key, label, unit in (
        ("p99", "report latency p99 while placing", "ms"),
        ("rss", "coordinator RSS (service), highest", "MB"),
        ("worker", "pass worker RSS, highest", "MB"),
    ):
        figures = [run[key] for run in runs]
        spread = ", ".join(f"{f:.1f}" for f in figures)
        medians[key] = statistics.median(figures)
        print(f"{label}: median {medians[key]:.1f} {unit} of [{spread}]")
    return medians


async def submit_to_placed(c: Coordinator, count: int) -> list[float]:
    """Each of `count` 1-GPU submissions, one at a time, in ms: from sending the request to the
    run's placement committed in the file (polled every millisecond)."""
    took = []
    for i in range(count):
        name = f"s{i}-{time.monotonic_ns()}"
        started = time.perf_counter()
        await c.call("POST", "/api/v1/runs", c.cluster.member, {**ONE_GPU, "name": name})
        for _ in range(60_000):  # a minute at most
            if not c.count(
                "SELECT count(*) FROM runs WHERE name = ? AND state = 'Pending'", (name,)
            ):
                break
            await asyncio.sleep(0.001)
        took.append((time.perf_counter() - started) * 1000)
        await asyncio.sleep(0.05)
    return took


async def first_after_start(c: Coordinator) -> dict[str, float]:
    """Right after `/healthz` answers: the first dry run (a user's first `--dry-run` after a
    restart, with nothing queued), then one 1-GPU run submitted as it answers and its placement
    waited for. Seconds from the process's start to `/healthz` and to that run placed (its
    submission follows the dry run's answer), the dry run in ms, and the resident memory of the
    service and of its pass worker once it is placed (MB)."""
    started = time.perf_counter()
    answer = await c.call("POST", "/api/v1/runs?dry_run=1", c.cluster.member, ONE_GPU)
    dry = (time.perf_counter() - started) * 1000
    if not answer["would_start"]:  # a pass's time ran out before the run was looked at
        print(f"    the first dry run did not place: {answer['reason']}", flush=True)
    name = f"first-{time.monotonic_ns()}"
    await c.call("POST", "/api/v1/runs", c.cluster.member, {**ONE_GPU, "name": name})
    query = "SELECT count(*) FROM runs WHERE name = ? AND state = 'Pending'"
    for _ in range(600_000):  # ten minutes at most
        if not c.count(query, (name,)):
            break
        await asyncio.sleep(0.001)
    placed = time.perf_counter() - c.launched
    await asyncio.sleep(1)  # the pass that placed it has ended: memory as it is kept
    rss = await settled_rss(c)
    return {
        "start": c.ready - c.launched,
        "first_placed": placed,
        "first_dry": dry,
        "rss_service": rss["service"] / MB,
        "rss_worker": rss.get("worker", 0) / MB,
    }


async def settled_rss(c: Coordinator, seconds: float = 120.0) -> dict[str, int]:
    """Resident memory once the pass worker has built what it keeps: the first runs after a
    start are placed by the service while the worker still reads the machines
    (`Scheduler._worker_ready`), so its memory is read when it has not grown by 1 MB for 2 s."""
    rss = c.rss()
    steady = 0
    for _ in range(int(seconds / 0.5)):
        await asyncio.sleep(0.5)
        now = c.rss()
        steady = steady + 1 if abs(now.get("worker", 0) - rss.get("worker", 0)) < MB else 0
        rss = now
        if steady >= 4:
            break
    return rss


async def http_dry_run(
    c: Coordinator, count: int, body: dict[str, Any], *, starts: bool = True
) -> float:
    """Median in ms of `count` dry runs of `body`, one at a time; a run that `starts` is
    answered with its workers, one that does not with its explanation grouped by reason."""
    took = []
    path = "/api/v1/runs?dry_run=1" + ("" if starts else "&explain=grouped")
    for _ in range(count):
        started = time.perf_counter()
        answer = await c.call("POST", path, c.cluster.member, body)
        took.append(time.perf_counter() - started)
        assert answer["would_start"] is starts, answer  # noqa: S101 - the cluster is idle
    return statistics.median(took) * 1000


def cli_dry_run(c: Coordinator, count: int) -> float:
    env = {
        **os.environ,
        "ASTRA_API": c.base,
        "ASTRA_TOKEN": c.cluster.member,
        "ASTRA_WORKSPACE": "bench",
    }
    command = [str(ASTRA), "astraeus", "run", "--name", "probe", "--gpus", "1", "--dry-run"]
    took = []
    for _ in range(count):
        started = time.perf_counter()
        done = subprocess.run([*command, "--", "true"], env=env, capture_output=True, check=False)  # noqa: S603
        took.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise RuntimeError(f"astra: {done.returncode} {done.stderr.decode()}")
    return statistics.median(took) * 1000


async def idle(
    machines: int,
    repeat: int,
    submissions: int,
    server: Any = None,
    *,
    start_only: bool = False,
    start_seconds: float = 60.0,
    waiting: int = 0,
) -> dict[str, float]:
    """The idle cluster's figures, printed; their medians returned. `start_only`: only the
    figures of a start (`first_after_start`); `start_seconds`: how long a start may take;
    `waiting`: runs no machine can take, queued before the start (issue 29 measures memory
    with 10,000 queued): every pass walks them, and they stay queued."""
    store = "sqlite" if server is None else "postgresql"
    queue = f", {waiting} runs queued that wait" if waiting else ", nothing queued"
    print(f"== an idle cluster of {machines} machines, {store}{queue}")
    cluster = Cluster(machines, server=server, waiting=waiting)
    figures: dict[str, list[float]] = {
        "placed": [],
        "tail": [],
        "http": [],
        "gang": [],
        "never": [],
        "cli": [],
        **{key: [] for key in START},
    }
    try:
        for i in range(repeat):
            async with Coordinator(cluster, start_seconds=start_seconds) as c:
                for key, value in (await first_after_start(c)).items():
                    figures[key].append(value)
                print(
                    f"  run {i + 1}: start {figures['start'][-1]:.1f} s, start to first placement"
                    f" {figures['first_placed'][-1]:.1f} s, first dry run after start"
                    f" {figures['first_dry'][-1]:.0f} ms, RSS service"
                    f" {figures['rss_service'][-1]:.0f} MB, pass worker"
                    f" {figures['rss_worker'][-1]:.0f} MB ({load()})",
                    flush=True,
                )
                if start_only:
                    continue
                await c.first_pass()  # what is measured is an idle cluster, not its start
                figures["http"].append(await http_dry_run(c, 20, ONE_GPU))
                figures["gang"].append(await http_dry_run(c, 20, GANG))
                figures["never"].append(await http_dry_run(c, 20, NEVER, starts=False))
                figures["cli"].append(await asyncio.to_thread(cli_dry_run, c, 5))
                took = await submit_to_placed(c, submissions)
                figures["placed"].append(percentile(took, 0.5))
                figures["tail"].append(percentile(took, 0.99))
            print(
                f"  run {i + 1}: submission to placed p50 {figures['placed'][-1]:.1f} ms,"
                f" p99 {figures['tail'][-1]:.1f} ms (max {max(took):.1f} ms of {len(took)}), "
                f"1-GPU dry run HTTP {figures['http'][-1]:.1f} ms, "
                f"64-GPU gang {figures['gang'][-1]:.1f} ms, "
                f"unplaceable, grouped {figures['never'][-1]:.1f} ms, "
                f"CLI {figures['cli'][-1]:.0f} ms ({load()})",
                flush=True,
            )
    finally:
        cluster.remove()
    medians = {}
    for key, (label, unit) in START.items():
        spread = ", ".join(f"{f:.1f}" for f in figures[key])
        medians[key] = statistics.median(figures[key])
        print(f"{label} at {machines} machines: median {medians[key]:.1f} {unit} of [{spread}]")
    if start_only:
        return medians
    for key, label in (
        ("placed", "submission to placed, 1-GPU, p50"),
        ("tail", "submission to placed, 1-GPU, p99"),
        ("http", "1-GPU dry run over HTTP, median"),
        ("gang", "64-GPU gang dry run over HTTP, median"),
        ("never", "unplaceable dry run over HTTP, explain=grouped, median"),
        ("cli", "1-GPU dry run from the CLI (`astra ... --dry-run`), median"),
    ):
        spread = ", ".join(f"{f:.1f}" for f in figures[key])
        medians[key] = statistics.median(figures[key])
        print(f"{label} at {machines} machines: median {medians[key]:.1f} ms of [{spread}]")
    if server is None:
        peer(machines, repeat, medians["cli"])
    return medians


def peer(machines: int, repeat: int, cli_ms: float) -> None:
    slurm = SlurmPeer.find()
    if slurm is None:
        print(f"Slurm at {machines} machines: skipped, {SlurmPeer.missing()}")
        return
    with slurm.cluster(machines) as running:
        figures = [running.test_only_ms(5) for _ in range(repeat)]
    median = statistics.median(figures)
    print(
        f"Slurm `sbatch --test-only` at {machines} CLOUD nodes: median {median:.1f} ms;"
        f" Astraeus CLI / Slurm = {cli_ms / median:.2f}"
    )


def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs ({model}), Python {sys.version.split()[0]}, {load()}"


SUMMARY = (
    ("rate", "1-GPU runs placed and committed per second", "/s", "≥ 1,000/s"),
    ("p99", "report latency p99 while placing", " ms", "≤ 50 ms"),
    ("http", "1-GPU dry run over HTTP, median", " ms", "≤ 10 ms"),
    ("placed", "submission to placed, 1-GPU, p50", " ms", "≤ 20 ms"),
    ("tail", "submission to placed, 1-GPU, p99", " ms", "≤ 30 ms (issue 29)"),
)
"""The issue-17 figures printed side by side: (key, label, unit, target)."""


def summary(machines: int, found: dict[str, dict[str, float]]) -> None:
    """Each engine's medians of the issue-17 figures in one table."""
    stores = list(found)
    print(f"== issue-17 figures at {machines} machines, medians ({load()})")
    print(f"{'measure':<45}" + "".join(f"{store:>14}" for store in stores) + "  target")
    for key, label, unit, target in SUMMARY:
        cells = "".join(
            f"{found[store][key]:>{14 - len(unit)},.1f}{unit}"
            if key in found[store]
            else f"{'-':>14}"
            for store in stores
        )
        print(f"{label:<45}{cells}  {target}")


def private_server() -> Any:
    """A PostgreSQL server of this run's own (`tests/pg_server.py`), stopped at the end."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import pg_server  # only for --store postgresql or both

    started = pg_server.start()
    if isinstance(started, str):
        raise SystemExit(f"coordinator_bench: no PostgreSQL server: {started}")
    return started


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000,20000", help="machines, comma-separated")
    parser.add_argument("--machines", type=int, default=5000, help="for the deep queue")
    parser.add_argument("--queued", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=500.0, help="reports per second")
    parser.add_argument("--window", type=float, default=120.0, help="longest run, seconds")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--submissions", type=int, default=100, help="per run, when idle")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-idle", action="store_true")
    parser.add_argument(
        "--start-only",
        action="store_true",
        help="idle: only the figures of a start (start, first placement, first dry run, memory)",
    )
    parser.add_argument(
        "--start-seconds",
        type=float,
        default=60.0,
        help="how long a coordinator may take to start (50,000 machines on a busy machine: more)",
    )
    parser.add_argument(
        "--idle-queued",
        type=int,
        default=0,
        help="idle: runs no machine can take, queued before each start (they stay queued)",
    )
    parser.add_argument(
        "--store",
        choices=[*STORES, "both"],
        default="sqlite",
        help="the coordinator's database: the SQLite file, a private PostgreSQL server, or both",
    )
    args = parser.parse_args()
    stores = list(STORES) if args.store == "both" else [args.store]
    server = private_server() if "postgresql" in stores else None
    found: dict[str, dict[str, float]] = {store: {} for store in stores}
    try:
        print(machine(), flush=True)
        for store in stores:
            on = server if store == "postgresql" else None
            if not args.skip_idle:
                for size in (int(s) for s in args.sizes.split(",")):
                    figures = asyncio.run(
                        idle(
                            size,
                            args.repeat,
                            args.submissions,
                            on,
                            start_only=args.start_only,
                            start_seconds=args.start_seconds,
                            waiting=args.idle_queued,
                        )
                    )
                    if size == args.machines:
                        found[store].update(figures)
            if not args.skip_throughput:
                found[store].update(
                    asyncio.run(
                        deep_queue(
                            args.machines, args.queued, args.rate, args.window, args.repeat, on
                        )
                    )
                )
        summary(args.machines, found)
    finally:
        if server is not None:
            server.stop()
    print(f"done ({load()})")


if __name__ == "__main__":
    main()
