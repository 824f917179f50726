"""Soak: does the coordinator's memory stay flat while runs come and go for hours?

    .venv/bin/python benchmarks/soak_bench.py                  # two hours (issue 25)
    .venv/bin/python benchmarks/soak_bench.py --minutes 5      # a quick check
    .venv/bin/python benchmarks/soak_bench.py --minutes 10 --trace   # and where memory goes

A real `astraeus-coordinator` process on loopback (`coordinator_rig.py`) with `--machines` fake
agents, each reporting every `--interval` seconds as a real agent does: its workers' updates
(Starting, Running, then Succeeded after `--hold` seconds), a log chunk per task, and the tasks
it runs. A user submits `--rate` 1-GPU runs a second (each is placed, run and ended: stored for
good). Every minute it prints the service's resident memory (VmRSS), the pass worker's, the runs
stored and the load average; at the end, whether the service's RSS after `--warmup` minutes
stayed within `--tolerance` (10 %) of the first figure after the warm-up.

`--trace` starts the service under tracemalloc (`soak_trace.py`): a snapshot each minute, the
largest growths between the first after the warm-up and the last printed by traceback, and at
the end the garbage frozen by the gc policy (`gc_policy.py`) collected and counted.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import signal
import sys
import tempfile
import time
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from coordinator_bench import machine
from coordinator_rig import ONE_GPU, Cluster, Coordinator, load, machine_report

MB = 1024 * 1024
HERE = Path(__file__).resolve().parent


class Agent:
    """One fake machine's agent: runs what it is assigned for `hold` seconds, then ends it."""

    def __init__(self, c: Coordinator, name: str, hold: float) -> None:
        self.c = c
        self.name = name
        self.hold = hold
        self.seq = itertools.count()
        self.running: dict[str, float] = {}
        """Task uid -> when its worker started."""
        self.unacked: list[dict[str, Any]] = []
        self.logs: list[dict[str, Any]] = []
        self.ended: set[str] = set()
        """Tasks ended here that a reply may still list until the end is stored."""
        self.finished = 0

    def _update(self, uid: str, state: str, **extra: Any) -> None:
        at = datetime.now(UTC).isoformat()
        self.unacked.append(
            {"seq": next(self.seq), "task_uid": uid, "state": state, "at": at, **extra}
        )

    async def report(self) -> None:
        now = time.monotonic()
        for uid, since in list(self.running.items()):
            if now - since >= self.hold:
                del self.running[uid]
                self.ended.add(uid)
                text = f"step {uid} done\n" * 8
                self.logs.append({"task_uid": uid, "offset": 0, "end": len(text), "data": text})
                self._update(uid, "Succeeded", exit_code=0)
        body = {
            "report": machine_report(self.name),
            "updates": self.unacked,
            "logs": self.logs,
            "tasks": list(self.running),
        }
        self.logs = []
        path = f"/api/v1/machines/{self.name}/report"
        reply = await self.c.call("PUT", path, self.c.cluster.agents[self.name], body)
        acked = reply["acked_seq"]
        self.unacked = [u for u in self.unacked if u["seq"] > acked]
        listed = set()
        for assignment in reply["assignments"]:
            uid = assignment["task_uid"]
            listed.add(uid)
            if uid in self.running or uid in self.ended:
                continue
            if assignment["cancel"]:
                self._update(uid, "Cancelled")
                self.ended.add(uid)
                continue
            self.running[uid] = now
            self._update(uid, "Starting")
            self._update(uid, "Running")
        self.finished += len(self.ended - listed)
        self.ended &= listed


async def agents(c: Coordinator, hold: float, interval: float, stop: asyncio.Event) -> int:
    """Every machine reports every `interval` seconds (spread over it) until `stop`; returns
    the reports that failed."""
    failed = 0

    async def one(agent: Agent, offset: float) -> None:
        nonlocal failed
        await asyncio.sleep(offset)
        while not stop.is_set():
            started = time.monotonic()
            try:
                await agent.report()
            except (TimeoutError, RuntimeError, OSError):
                failed += 1
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))

    names = list(c.cluster.agents)
    spread = interval / max(len(names), 1)
    everyone = [Agent(c, name, hold) for name in names]
    await asyncio.gather(*(one(agent, i * spread) for i, agent in enumerate(everyone)))
    return failed


WHOLE = {"gpu_requests": {"count": 8, "min_per_machine": 8}}
"""A run that needs a whole machine: with `--whole`, it often waits (with its explanation)."""


async def submitter(c: Coordinator, rate: float, whole: int, stop: asyncio.Event) -> int:
    """`rate` runs a second, each its own name, 1-GPU but every `whole`-th (when not 0) on a
    whole machine of 8; returns how many were submitted."""
    sent = 0
    started = time.monotonic()
    while not stop.is_set():
        delay = started + sent / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        body: dict[str, Any] = {**ONE_GPU, "name": f"soak-{sent}"}
        if whole and sent % whole == whole - 1:
            body["requested_resources"] = WHOLE
        try:
            await c.call("POST", "/api/v1/runs", c.cluster.member, body)
        except (TimeoutError, RuntimeError, OSError) as error:
            print(f"  submission failed: {error}", flush=True)
        sent += 1
    return sent


async def _dumped(pid: int, sig: int, written: Path) -> None:
    """Ask the traced service for a snapshot and wait until it is written (one at a time: a
    signal that comes while one is being written would nest)."""
    os.kill(pid, sig)
    for _ in range(1200):
        if await asyncio.to_thread(written.exists):
            return
        await asyncio.sleep(0.1)
    raise RuntimeError(f"the service wrote no {written.name} in two minutes")


def _threads_and_files(pid: int) -> tuple[int, int]:
    """The service's threads and open file descriptors now."""
    try:
        return len(os.listdir(f"/proc/{pid}/task")), len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0, 0


def flat(figures: list[int], tolerance: float) -> tuple[bool, float]:
    """Whether every figure stayed within `tolerance` of the first, and the largest
    departure from it (a fraction)."""
    first = figures[0]
    worst = max(abs(f - first) / first for f in figures)
    return worst <= tolerance, worst


def top_growth(first: Path, last: Path, limit: int = 12) -> list[str]:
    """The largest growths between two tracemalloc snapshots, by traceback."""
    old = tracemalloc.Snapshot.load(str(first))
    new = tracemalloc.Snapshot.load(str(last))
    skip = tracemalloc.Filter(False, tracemalloc.__file__)
    old, new = old.filter_traces([skip]), new.filter_traces([skip])
    lines = []
    for stat in new.compare_to(old, "traceback")[:limit]:
        lines.append(
            f"  {stat.size_diff / 1024:+.0f} KiB, {stat.count_diff:+d} blocks"
            f" (now {stat.size / 1024:.0f} KiB)"
        )
        lines += [
            f"      {line}" for line in stat.traceback.format(limit=8, most_recent_first=True)
        ]
    return lines


async def soak(args: argparse.Namespace) -> bool:
    print(
        f"== soak: {args.minutes} min, {args.machines} machines reporting every"
        f" {args.interval:g} s, {args.rate:g} runs/s of {args.hold:g} s"
        + (f", every {args.whole}th on a whole machine" if args.whole else ""),
        flush=True,
    )
    cluster = Cluster(args.machines)
    trace = Path(tempfile.mkdtemp(prefix="astraeus-soak-")) if args.trace else None
    launch = (sys.executable, str(HERE / "soak_trace.py"), str(trace)) if trace else None
    try:
        # Under tracemalloc the service's imports alone take 25 s to minutes on a loaded machine.
        kwargs: dict[str, Any] = {"launch": launch, "start_seconds": 600.0} if launch else {}
        async with Coordinator(
            cluster, ASTRAEUS_REPORT_INTERVAL_SECONDS=str(args.interval), **kwargs
        ) as c:
            assert c.process is not None  # noqa: S101 - started
            stop = asyncio.Event()
            load_tasks = [
                asyncio.create_task(agents(c, args.hold, args.interval, stop)),
                asyncio.create_task(submitter(c, args.rate, args.whole, stop)),
            ]
            service: list[int] = []
            started = time.monotonic()
            for minute in range(1, args.minutes + 1):
                await asyncio.sleep(
                    max(0.0, started + args.sample_seconds * minute - time.monotonic())
                )
                rss = c.rss()
                service.append(rss["service"])
                stored = c.count("SELECT count(*) FROM runs")
                ended = c.count("SELECT count(*) FROM runs WHERE state = 'Succeeded'")
                threads, files = _threads_and_files(c.process.pid)
                print(
                    f"  minute {minute}: service RSS {rss['service'] / MB:.1f} MB, pass worker"
                    f" {rss.get('worker', 0) / MB:.1f} MB; {threads} threads, {files} open"
                    f" files; {stored} runs stored, {ended} succeeded ({load()})",
                    flush=True,
                )
                if trace is not None:
                    await _dumped(c.process.pid, signal.SIGUSR1, trace / f"{minute}.json")
            if trace is not None:
                await _dumped(c.process.pid, signal.SIGUSR2, trace / f"{args.minutes + 1}.json")
            stop.set()
            failed, submitted = await asyncio.gather(*load_tasks)
    finally:
        cluster.remove()
    print(f"  {submitted} runs submitted, {failed} reports failed")
    kept = service[args.warmup :]
    if len(kept) < 2:
        print(f"too short to judge: {len(service)} minutes, {args.warmup} of warm-up")
        return False
    steady, worst = flat(kept, args.tolerance)
    half = kept[len(kept) // 2 :]
    slope = (half[-1] - half[0]) / max(len(half) - 1, 1) / MB
    print(
        f"service RSS after {args.warmup} min of warm-up: {kept[0] / MB:.1f} MB, then"
        f" {min(kept) / MB:.1f}-{max(kept) / MB:.1f} MB, last {kept[-1] / MB:.1f} MB;"
        f" largest departure {worst * 100:.1f} %: {'FLAT' if steady else 'NOT FLAT'}"
        f" (within {args.tolerance * 100:.0f} %); {slope:+.2f} MB a minute over the last"
        f" {len(half)} minutes",
        flush=True,
    )
    if trace is not None:
        report_trace(trace, args.warmup, args.minutes)
    return steady


def report_trace(trace: Path, warmup: int, minutes: int) -> None:
    first = warmup + 1
    figures = {n: json.loads((trace / f"{n}.json").read_text()) for n in (first, minutes)}
    for n, found in figures.items():
        print(
            f"  traced at minute {n}: {found['traced_bytes'] / MB:.1f} MB, SQLite's own"
            f" {found['sqlite_bytes'] / MB:.1f} MB, {found['tracked']} tracked objects,"
            f" {found['frozen']} frozen"
        )
    print(f"largest growths from minute {first} to {minutes}, by traceback:")
    print("\n".join(top_growth(trace / f"{first}.snapshot", trace / f"{minutes}.snapshot")))
    last = json.loads((trace / f"{minutes + 1}.json").read_text())
    print(
        f"frozen garbage at the end: {last['freed_objects']} objects,"
        f" {last['freed_bytes'] / MB:.2f} MB traced, of {last['frozen_before']} frozen"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--minutes", type=int, default=120)
    parser.add_argument("--warmup", type=int, default=None, help="minutes (default: a tenth)")
    parser.add_argument("--machines", type=int, default=100)
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between reports")
    parser.add_argument("--rate", type=float, default=5.0, help="runs submitted a second")
    parser.add_argument("--hold", type=float, default=5.0, help="seconds each run runs")
    parser.add_argument(
        "--whole", type=int, default=0, help="every n-th run takes a whole machine (0: none)"
    )
    parser.add_argument("--tolerance", type=float, default=0.10)
    parser.add_argument("--trace", action="store_true", help="tracemalloc in the service")
    parser.add_argument(
        "--sample-seconds", type=float, default=60.0, help="between samples (a 'minute')"
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="three samples 1.5 s apart, 5 machines: that it runs (the suite's smoke test), its"
        " judgement of flatness aside",
    )
    args = parser.parse_args()
    if args.smoke:
        args.minutes, args.warmup, args.sample_seconds = 3, 1, 1.5
        args.machines, args.interval, args.rate, args.hold = 5, 0.5, 4.0, 0.5
    if args.warmup is None:
        args.warmup = max(1, args.minutes // 10)
    print(machine(), flush=True)
    steady = asyncio.run(soak(args))
    print(f"done ({load()})")
    sys.exit(0 if steady or args.smoke else 1)


if __name__ == "__main__":
    main()
