"""The store's own costs on SQLite and on PostgreSQL, in the same run: the median of three.

    .venv/bin/python benchmarks/store_engines.py [--runs 2000] [--database-url postgresql://...]

For each engine, on a new database each time: `--runs` 1-GPU submissions through
`Runs.submit` (one transaction each, as the API makes them), the queue read (`read_queue`), all
of them placed through `commit_pass` in chunks of `COMMIT_CHUNK` (the scheduler's commit), and
the usage read (`read_usage`). No HTTP, no engine: what the choice of database costs the
coordinator. Without `--database-url` a private server is started for the run
(`tests/pg_server.py`: Debian's initdb, fsync off); with one, an empty database given there is
used (its tables are created, then left). Prints the load average: the figures are only
comparable on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from astraeus.coordinator.scheduler.loop import COMMIT_CHUNK
from astraeus.coordinator.store import Store
from astraeus.coordinator.store.commit import PlacementRow, WorkerRow, commit_pass
from astraeus.coordinator.store.queue import read_queue, read_usage
from astraeus.shared import RunSpec
from astraeus.shared.admin import WorkspaceSpec
from astraeus.shared.clock import SystemClock

ONE_GPU = {"name": "r", "command": ["x"], "requested_resources": {"gpu_requests": {"count": 1}}}


def once(location: Path | str, runs: int) -> tuple[float, float, float, float]:
    """(submissions/s, placements committed/s, queue read ms, usage read ms)."""
    store = Store.open(location)
    now = SystemClock().now()
    store.workspaces.put(WorkspaceSpec(name="bench"), now)
    ask = RunSpec.model_validate(ONE_GPU)
    started = time.perf_counter()
    for i in range(runs):
        store.runs.submit(ask.model_copy(update={"name": f"r{i}"}), "bench", now)
    submitted = runs / (time.perf_counter() - started)
    started = time.perf_counter()
    queue = read_queue(store.database)
    queue_ms = (time.perf_counter() - started) * 1000
    rows = [
        PlacementRow(
            item.seq,
            item.run,
            0,
            (WorkerRow(f"gpu-{i // 8:05}", (str(i % 8),), json.dumps([str(i % 8)]), 0.0, 0),),
            "{}",
            '{"rung": "node"}',
            "none",
            None,
        )
        for i, item in enumerate(queue)
    ]
    started = time.perf_counter()
    placed = sum(
        commit_pass(store.database, rows[at : at + COMMIT_CHUNK], [], now)
        for at in range(0, len(rows), COMMIT_CHUNK)
    )
    committed = placed / (time.perf_counter() - started)
    started = time.perf_counter()
    usage = read_usage(store.database)
    usage_ms = (time.perf_counter() - started) * 1000
    store.close()
    if placed != runs or sum(len(u.gpu_ids) for u in usage.values()) != runs:
        raise RuntimeError(f"placed {placed} of {runs}")
    return submitted, committed, queue_ms, usage_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--database-url", help="an empty PostgreSQL database (default: private)")
    parser.add_argument(
        "--smoke", action="store_true", help="a tiny size: that it runs (the suite's smoke test)"
    )
    args = parser.parse_args()
    if args.smoke:
        args.runs = 20
    server = None
    if args.database_url:
        urls = [args.database_url] * 3
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        import pg_server  # only without --database-url

        started = pg_server.start()
        if isinstance(started, str):
            raise SystemExit(f"store_engines: no PostgreSQL server: {started}")
        server = started
        urls = [server.create_database() for _ in range(3)]
    folder = Path(tempfile.mkdtemp(prefix="astraeus-store-bench-"))
    try:
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        engines = [("sqlite", [folder / f"{n}.db" for n in range(3)]), ("postgresql", urls)]
        for name, locations in engines:
            found = [once(location, args.runs) for location in locations]
            med = [statistics.median(r[k] for r in found) for k in range(4)]
            print(
                f"{name:10} {args.runs} runs: submissions {med[0]:,.0f}/s, placements committed"
                f" {med[1]:,.0f}/s, queue read {med[2]:.1f} ms, usage read {med[3]:.1f} ms"
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
