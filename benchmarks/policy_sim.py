"""Queue policies side by side: one workload replayed through the real scheduler (the queue walk,
fair share, holds and backfill, the placement engine over a real SQLite store) on a simulated
clock, once per policy, and the figures printed in one table.

    .venv/bin/python benchmarks/policy_sim.py            # 1,000 machines, 6,000 runs
    .venv/bin/python benchmarks/policy_sim.py --jobs 1   # one policy at a time
    .venv/bin/python benchmarks/policy_sim.py --small    # 50 machines, 200 runs: a quick check
    .venv/bin/python benchmarks/policy_sim.py --smoke    # 12 machines, 40 runs (tests/benchmarks)

Policies (coordinator settings `fair_share`, `backfill`, and `preemption` once it exists):

- FIFO: `fair_share = false`, `backfill = false` (priority, then submission time);
- fair share: `fair_share = true` (usage with the 7-day half-life; all weights 1);
- fair share + backfill: both on (the defaults);
- all + preemption: both on and `preemption = "priority"`; printed as "not built yet" while the
  coordinator's `Settings` has no `preemption` field.

How a run is replayed. Runs are stored with `store.runs.submit` (what `POST /api/v1/runs`
does once it has checked the caller) at their submission time. Machines report through the
report service (`Reports.receive`, what `PUT /machines/<name>/report` calls) with 8 fake H100s
each; the simulated agent starts a worker when its assignment appears in the reply, reports it
Running, reports it Succeeded when its run's duration is over, and reports Cancelled a worker the
coordinator no longer assigns (or cancels), as the real runner does after SIGTERM. A preempted
run starts again from the beginning (no checkpoint). Passes are `Scheduler.run_pass`, the
scheduler loop's own, with `max_pass_seconds` large enough that no pass is cut (a cut depends on
this machine's speed, and the comparison would not be the same workload), on a `FakeClock`
that jumps from one event (a submission, a run's end) to the next, rounded up to `--tick` (5
simulated minutes by default: a GPU freed waits up to that long for the next pass, the same for
every policy; `--tick 60` is finer and several times slower). Machines never go Down:
`down_after_seconds` is set past the simulated span, so machines without news need not report.

The workload (seeded; the same for every policy). Sizes and durations follow the buckets of the
Philly trace (Jeon et al., "Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN Training
Workloads", USENIX ATC 2019; trace: github.com/msr-fiddle/philly-traces, 117,325 jobs submitted
2017-08-07 to 2017-12-22). The paper's Figure 2 (run times) and the trace's analysis notebook
group jobs by GPU count as 1, 2-4, 5-8 and >8 GPUs, and so does `SIZES`. The share of runs in
each bucket and the log-normal medians are this script's own choice (most runs on one GPU,
bigger runs fewer and longer, a tail of days), NOT figures read from the paper, whose numbers
could not be checked from where this was written: see docs/benchmarks.md.

Time limits: users over-ask, so each run's limit is its duration times
`LIMIT_FACTOR` (2) rounded up to the next of `LIMIT_STEPS` (30 min ... 7 days), as people type
round numbers. Arrivals: `flood` submits `FLOOD_SHARE` of the runs (a sweep that asks for
more GPUs than the cluster has) within its first `FLOOD_SECONDS`, as a team submitting 1,000
runs at 6 am does (issue 28's "first come takes all"); `steady-1`..`steady-3` submit the rest
as Poisson arrivals over the window: the longest in which all the runs ask `--load` (1.2) times
the cluster's GPU-hours, counting of each run only the part of its duration before the window
ends (so the cluster is oversubscribed throughout, not just at the start); `PRIORITY_SHARE` of
the steady runs have priority 100 (what preemption would act on).

Figures, all over the window from the first submission to the last:

- GPU utilisation: GPU-seconds held by tasks in the window / (GPUs x window);
- wait: from submission until the run's first placement (its first task's `assigned_at`), for
  every run (runs are replayed until all have ended); mean, p95, p95 of 1-GPU runs, and p95 of
  the steady workspaces' runs and of the flood's apart (fair share moves waiting from the
  first to the second; it cannot shorten the time the whole backlog takes);
- Jain's fairness index over workspaces of x = GPU-hours received in the window / GPU-hours the
  workspace was entitled to there: its demand in the window (each run's GPUs x the part of its
  duration that fits before the window ends) shared out max-min (water-filling) over the
  window's capacity, every weight being 1. 1 is perfectly fair, 1/n is one workspace taking it
  all.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import heapq
import json
import math
import multiprocessing
import os
import random
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from coordinator_bench import machine as describe_machine
from coordinator_rig import machine_report

from astraeus.coordinator.machine_records import MachineRecords
from astraeus.coordinator.metrics import Metrics
from astraeus.coordinator.reports import Reports
from astraeus.coordinator.scheduler import Scheduler
from astraeus.coordinator.scheduler.port_grants import Ports
from astraeus.coordinator.settings import Settings
from astraeus.coordinator.store import Store
from astraeus.coordinator.store.preemption import preemption_totals
from astraeus.shared import AgentReport, Assignment, RunSpec
from astraeus.shared.admin import WorkspaceSpec
from astraeus.shared.clock import FakeClock

START = datetime(2026, 1, 5, tzinfo=UTC)
TICK = 300.0
"""Events are batched per this many simulated seconds (`--tick`): at most one pass each. At
1,000 machines a pass with a deep queue takes seconds of real time (it explains up to
`max_pending_evaluations` waiting runs), so a finer tick would not keep the replay in minutes."""
GPUS_PER_MACHINE = 8
NEVER = 10 * 365 * 86400.0
"""`down_after_seconds` and `lost_after_seconds` in the simulation: no machine goes silent."""

SIZES: tuple[tuple[str, float, tuple[int, ...], float, float], ...] = (
    # bucket, share of runs, GPU counts drawn evenly, median minutes, log-normal sigma
    ("1", 0.70, (1,), 20.0, 1.8),
    ("2-4", 0.15, (2, 4), 45.0, 1.8),
    ("5-8", 0.10, (8,), 90.0, 1.8),
    (">8", 0.05, (16, 32, 64), 180.0, 1.6),
)
"""The Philly paper's GPU-count buckets (Figure 2); the shares and medians are this script's,
not the paper's (see the module's docstring)."""
LONGEST_SECONDS = 3 * 86400.0
"""Durations are cut here: a few runs of weeks would only lengthen the replay's tail."""
SHORTEST_SECONDS = 60.0
LIMIT_FACTOR = 2.0
LIMIT_STEPS = tuple(int(h * 3600) for h in (0.5, 1, 2, 4, 8, 12, 24, 48, 72, 120, 168))
"""Time limits people type: 30 min, 1 h, 2 h, 4 h, 8 h, 12 h, 1, 2, 3, 5 and 7 days."""
FLOOD_SHARE = 0.6
FLOOD_SECONDS = 15 * 60.0
STEADY = ("steady-1", "steady-2", "steady-3")
PRIORITY_SHARE = 0.03
HIGH_PRIORITY = 100


@dataclass(frozen=True)
class Job:
    """One run of the workload."""

    name: str
    workspace: str
    submit: float
    """Seconds after `START`."""
    gpus: int
    duration: float
    time_limit: int
    priority: int = 0


@dataclass(frozen=True)
class Policy:
    name: str
    settings: dict[str, Any]
    needs: str | None = None
    """A `Settings` field the policy needs; without it the policy is "not built yet"."""


POLICIES = (
    Policy("FIFO", {"fair_share": False, "backfill": False}),
    Policy("fair share", {"fair_share": True, "backfill": False}),
    Policy("fair share + backfill", {"fair_share": True, "backfill": True}),
    Policy(
        "all + preemption",
        {"fair_share": True, "backfill": True, "preemption": "priority"},
        needs="preemption",
    ),
)


def time_limit(duration: float) -> int:
    """The duration times `LIMIT_FACTOR`, rounded up to the next round step."""
    wanted = duration * LIMIT_FACTOR
    at = bisect.bisect_left(LIMIT_STEPS, wanted)
    return LIMIT_STEPS[at] if at < len(LIMIT_STEPS) else LIMIT_STEPS[-1]


def draw_size(rng: random.Random) -> tuple[int, float]:
    """GPUs and duration (seconds) of one run: a bucket by its share, a GPU count of the
    bucket, a log-normal duration around the bucket's median."""
    _bucket, _share, counts, median, sigma = rng.choices(SIZES, weights=[s[1] for s in SIZES])[0]
    gpus = rng.choice(counts)
    minutes = rng.lognormvariate(math.log(median), sigma)
    return gpus, min(max(minutes * 60.0, SHORTEST_SECONDS), LONGEST_SECONDS)


def workload(runs: int, machines: int, load: float, seed: int) -> list[Job]:
    """`runs` runs: the flood's within its first `FLOOD_SECONDS`, the steady workspaces'
    spread evenly at random over the window (Poisson arrivals). The window is the longest in
    which the runs ask `load` times the cluster's GPU-seconds: each run's GPUs x the part of
    its duration before the window ends (`asked_within`). With too few runs for that, the
    window where they ask the most."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible workload, not a secret
    flood = int(runs * FLOOD_SHARE)
    drawn = []
    for i in range(runs):
        gpus, duration = draw_size(rng)
        steady = i >= flood
        at = rng.random()
        priority = HIGH_PRIORITY if steady and rng.random() < PRIORITY_SHARE else 0
        drawn.append((i, gpus, duration, steady, at, priority))

    def jobs_in(window: float) -> list[Job]:
        return [
            Job(
                f"r{i}",
                STEADY[i % len(STEADY)] if steady else "flood",
                at * (window if steady else FLOOD_SECONDS),
                gpus,
                duration,
                time_limit(duration),
                priority,
            )
            for i, gpus, duration, steady, at, priority in drawn
        ]

    capacity = machines * GPUS_PER_MACHINE
    windows = [FLOOD_SECONDS * 1.05**k for k in range(200)]  # 15 minutes to ~4 years
    ratios = [asked_within(jobs_in(w), w) / (capacity * w) for w in windows]
    enough = [w for w, ratio in zip(windows, ratios, strict=True) if ratio >= load]
    window = max(enough) if enough else windows[ratios.index(max(ratios))]
    jobs = jobs_in(window)
    jobs.sort(key=lambda job: job.submit)
    return jobs


def asked_within(jobs: Iterable[Job], window: float) -> float:
    """The GPU-seconds `jobs` ask before `window` ends, each from its submission."""
    return sum(job.gpus * max(0.0, min(job.duration, window - job.submit)) for job in jobs)


def spec(job: Job) -> RunSpec:
    return RunSpec.model_validate(
        {
            "name": job.name,
            "command": ["python", "train.py"],
            "priority": job.priority,
            "time_limit_seconds": job.time_limit,
            "requested_resources": {"gpu_requests": {"count": job.gpus}},
        }
    )


@dataclass
class Agent:
    """One machine's simulated agent: the workers it runs (task uid -> end, seconds after
    `START`) and the updates it has yet to send."""

    name: str
    running: dict[str, float] = field(default_factory=dict)
    outbox: list[dict[str, Any]] = field(default_factory=list)
    seq: int = -1

    def update(self, uid: str, state: str, now: datetime, **extra: Any) -> None:
        self.seq += 1
        self.outbox.append(
            {"seq": self.seq, "task_uid": uid, "state": state, "at": now.isoformat(), **extra}
        )


@dataclass
class Outcome:
    """One policy's figures."""

    policy: str
    utilisation: float
    mean_wait: float
    p95_wait: float
    p95_wait_1gpu: float
    p95_wait_steady: float
    """Of the steady workspaces' runs: what fair share is for."""
    p95_wait_flood: float
    jain: float
    runs: int
    ended: int
    preemptions: int
    stopped: int
    """Runs stopped by those preemptions (and started again from the beginning)."""
    passes: int
    seconds: float
    received: dict[str, float]
    entitled: dict[str, float]


class Simulation:
    """One policy over one workload: a store, the report service, the scheduler, the agents."""

    def __init__(
        self, jobs: Sequence[Job], machines: int, policy: Policy, folder: Path, tick: float
    ):
        self.jobs = list(jobs)
        self.tick = tick
        self.by_name = {job.name: job for job in jobs}
        self.policy = policy
        base = Settings(
            db=folder / "policy.db",
            state_dir=folder,
            scheduler=False,
            pass_process=False,
            max_report_delay_seconds=0,
            down_after_seconds=NEVER,
            lost_after_seconds=NEVER,
            max_pass_seconds=NEVER,
        )
        self.settings = replace(base, **policy.settings)
        self.clock = FakeClock(START)
        self.store = Store.open(self.settings.database)
        self.records = MachineRecords(self.store, self.settings.access_labels)
        self.reports = Reports(self.store, self.records, Ports(self.settings.port_range), 0)
        self.scheduler = Scheduler(self.settings, self.store, self.clock, Metrics(), self.reports)
        self.agents = {f"m-{i:05}": Agent(f"m-{i:05}") for i in range(machines)}
        self.bodies = {name: machine_report(name, GPUS_PER_MACHINE) for name in self.agents}
        self.ends: list[tuple[float, str, str]] = []
        """(end, machine, task uid) of every worker running, soonest first."""
        self.passes = 0

    def at(self) -> float:
        return (self.clock.now() - START).total_seconds()

    async def report(self, agent: Agent) -> list[Assignment]:
        """The agent's report with its updates and the workers it runs; the reply's
        assignments."""
        body = AgentReport.model_validate(
            {
                "report": self.bodies[agent.name],
                "updates": agent.outbox,
                "tasks": sorted(agent.running),
            }
        )
        agent.outbox = []
        received = await self.reports.receive(body, "127.0.0.1", self.clock.now())
        return received.assignments

    async def sync(self, agent: Agent) -> bool:
        """Report, then do as the reply says: start what is new, stop what is gone or
        cancelled. True when something changed (the agent has more to say)."""
        assignments = await self.report(agent)
        now, changed = self.clock.now(), False
        wanted = {a.task_uid: a for a in assignments}
        for uid in list(agent.running):
            if uid not in wanted or wanted[uid].cancel:
                del agent.running[uid]
                agent.update(uid, "Cancelled", now, message="cancelled: no longer assigned")
                changed = True
        for uid, assignment in wanted.items():
            if uid in agent.running or assignment.cancel:
                continue
            job = self.by_name[assignment.run]
            end = self.at() + job.duration
            agent.running[uid] = end
            heapq.heappush(self.ends, (end, agent.name, uid))
            agent.update(uid, "Running", now)
            changed = True
        return changed

    def stale(self) -> set[str]:
        """Machines whose live tasks in the store differ from what their agent runs: new
        placements, workers to stop."""
        live: dict[str, set[str]] = defaultdict(set)
        cancelled: set[str] = set()
        for machine, uid, cancel in self.store.database.tuples(
            "SELECT machine, uid, cancel FROM tasks WHERE machine IS NOT NULL"
            " AND state IN ('Assigned', 'Starting', 'Running')"
        ):
            live[machine].add(uid)
            if cancel:
                cancelled.add(machine)
        return {
            name
            for name, agent in self.agents.items()
            if live.get(name, set()) != set(agent.running) or name in cancelled
        }

    async def settle(self, machines: Iterable[str]) -> None:
        """Report until every agent agrees with the store: a gang's other workers start once
        worker 0 runs, so this takes a few rounds."""
        todo = set(machines)
        for _ in range(8):
            if not todo:
                return
            again = set()
            for name in sorted(todo):
                if await self.sync(self.agents[name]):
                    again.add(name)
            todo = again | self.stale()

    async def finish_due(self) -> None:
        """Workers whose duration is over end Succeeded, reported by their agents."""
        due: set[str] = set()
        now = self.at()
        while self.ends and self.ends[0][0] <= now:
            _end, machine, uid = heapq.heappop(self.ends)
            agent = self.agents[machine]
            if uid in agent.running:  # not stopped meanwhile
                del agent.running[uid]
                agent.update(uid, "Succeeded", self.clock.now(), exit_code=0)
                due.add(machine)
        for name in sorted(due):
            await self.sync(self.agents[name])

    def unfinished(self) -> int:
        row = self.store.database.read_one(
            "SELECT count(*) AS n FROM runs WHERE state NOT IN ('Succeeded', 'Failed', 'Cancelled')"
        )
        return int(row["n"]) if row else 0

    async def run(self) -> None:
        self.store.database.start_writer()
        try:
            await self._replay()
        finally:
            self.store.database.stop_writer()

    async def _replay(self) -> None:
        now = self.clock.now()
        for workspace in ("flood", *STEADY):
            self.store.workspaces.put(WorkspaceSpec(name=workspace), now)
        for agent in self.agents.values():
            self.records.ensure(agent.name, now)
            await self.report(agent)
        arrivals = list(self.jobs)
        next_arrival = 0
        while True:
            await self.finish_due()
            while next_arrival < len(arrivals) and arrivals[next_arrival].submit <= self.at():
                job = arrivals[next_arrival]
                self.store.runs.submit(spec(job), job.workspace, self.clock.now())
                next_arrival += 1
            await self.scheduler.run_pass()
            self.passes += 1
            await self.settle(self.stale())
            upcoming = []
            if next_arrival < len(arrivals):
                upcoming.append(arrivals[next_arrival].submit)
            if self.ends:
                upcoming.append(self.ends[0][0])
            if not upcoming:
                if self.unfinished():
                    raise RuntimeError(
                        f"{self.policy.name}: {self.unfinished()} runs wait with nothing"
                        " running and nothing left to submit"
                    )
                return
            step = max(min(upcoming) - self.at(), self.tick)
            self.clock.advance(math.ceil(step / self.tick) * self.tick)

    def measure(self, window: float, seconds: float) -> Outcome:
        """The figures over [START, START + window] (see the module's docstring)."""
        database = self.store.database
        end = START + timedelta(seconds=window)
        held: dict[str, float] = defaultdict(float)
        for workspace, gpu_ids, assigned, ended in database.tuples(
            "SELECT runs.workspace, tasks.gpu_ids, tasks.assigned_at, tasks.ended_at"
            " FROM tasks JOIN runs ON runs.seq = tasks.run_seq"
            " WHERE tasks.assigned_at IS NOT NULL"
        ):
            start_at = datetime.fromisoformat(assigned)
            stop_at = datetime.fromisoformat(ended) if ended else end
            span = (min(stop_at, end) - start_at).total_seconds()
            if span > 0:
                held[workspace] += len(json.loads(gpu_ids)) * span
        gpus = len(self.agents) * GPUS_PER_MACHINE
        waits: list[float] = []
        one_gpu: list[float] = []
        steady: list[float] = []
        flood: list[float] = []
        for name, submitted, first in database.tuples(
            "SELECT runs.name, runs.submitted_at, min(tasks.assigned_at) FROM runs"
            " JOIN tasks ON tasks.run_seq = runs.seq GROUP BY runs.seq"
        ):
            if first is None:
                continue
            wait = (
                datetime.fromisoformat(first) - datetime.fromisoformat(submitted)
            ).total_seconds()
            waits.append(wait)
            job = self.by_name[name]
            if job.gpus == 1:
                one_gpu.append(wait)
            (flood if job.workspace == "flood" else steady).append(wait)
        demand: dict[str, float] = defaultdict(float)
        for job in self.jobs:
            demand[job.workspace] += job.gpus * max(0.0, min(job.duration, window - job.submit))
        entitled = water_fill(demand, gpus * window)
        preemptions, stopped = preemption_totals(database)
        return Outcome(
            policy=self.policy.name,
            utilisation=sum(held.values()) / (gpus * window),
            mean_wait=statistics.fmean(waits) if waits else 0.0,
            p95_wait=percentile(waits, 0.95),
            p95_wait_1gpu=percentile(one_gpu, 0.95),
            p95_wait_steady=percentile(steady, 0.95),
            p95_wait_flood=percentile(flood, 0.95),
            jain=jain([held[w] / entitled[w] for w in entitled if entitled[w] > 0]),
            runs=len(self.jobs),
            ended=len(self.jobs) - self.unfinished(),
            preemptions=preemptions,
            stopped=stopped,
            passes=self.passes,
            seconds=seconds,
            received=dict(held),
            entitled=entitled,
        )


def water_fill(demand: dict[str, float], capacity: float) -> dict[str, float]:
    """Max-min fair shares of `capacity`: every workspace gets its demand or an equal share of
    what is left, whichever is less, the rest going to those that want more."""
    shares: dict[str, float] = {}
    left = dict(demand)
    room = capacity
    while left:
        each = room / len(left)
        small = {w: d for w, d in left.items() if d <= each}
        if not small:
            shares.update({w: each for w in left})
            return shares
        for workspace, wanted in small.items():
            shares[workspace] = wanted
            room -= wanted
            del left[workspace]
    return shares


def jain(values: Sequence[float]) -> float:
    """Jain's index: (sum x)^2 / (n sum x^2), 1/n to 1."""
    if not values or not any(values):
        return 0.0
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values))


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank `q` quantile (0 for none)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def built(policy: Policy) -> bool:
    return policy.needs is None or policy.needs in {f.name for f in fields(Settings)}


async def simulate(
    jobs: Sequence[Job], machines: int, policy: Policy, window: float, tick: float = TICK
) -> Outcome:
    folder = Path(tempfile.mkdtemp(prefix="astraeus-policy-"))
    started = time.perf_counter()
    try:
        sim = Simulation(jobs, machines, policy, folder, tick)
        try:
            await sim.run()
            return sim.measure(window, time.perf_counter() - started)
        finally:
            sim.store.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h"


def table(outcomes: Sequence[Outcome | Policy]) -> str:
    """The figures side by side, one column per policy (a markdown table)."""
    names = [o.policy if isinstance(o, Outcome) else o.name for o in outcomes]
    rows: list[tuple[str, Callable[[Outcome], str]]] = [
        ("GPU utilisation", lambda o: f"{o.utilisation:.1%}"),
        ("mean wait", lambda o: hours(o.mean_wait)),
        ("p95 wait", lambda o: hours(o.p95_wait)),
        ("p95 wait, 1-GPU runs", lambda o: hours(o.p95_wait_1gpu)),
        ("p95 wait, steady workspaces' runs", lambda o: hours(o.p95_wait_steady)),
        ("p95 wait, the flood's runs", lambda o: hours(o.p95_wait_flood)),
        ("Jain's index (workspaces)", lambda o: f"{o.jain:.3f}"),
        ("runs ended / submitted", lambda o: f"{o.ended} / {o.runs}"),
        ("preemptions (runs stopped)", lambda o: f"{o.preemptions} ({o.stopped})"),
        ("passes", lambda o: str(o.passes)),
        ("replay took", lambda o: f"{o.seconds:.0f} s"),
    ]
    lines = ["| | " + " | ".join(names) + " |", "| --- |" + " --- |" * len(names)]
    for label, cell in rows:
        cells = [cell(o) if isinstance(o, Outcome) else "not built yet" for o in outcomes]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def shares(outcome: Outcome) -> str:
    return ", ".join(
        f"{w} {outcome.received.get(w, 0.0) / 3600:.0f}/{outcome.entitled[w] / 3600:.0f}"
        for w in sorted(outcome.entitled)
    )


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


def describe(jobs: Sequence[Job], machines: int) -> str:
    window = max(job.submit for job in jobs)
    demand = asked_within(jobs, window)
    by_size: dict[str, int] = defaultdict(int)
    for job in jobs:
        bucket = next(b for b, _s, counts, _m, _g in SIZES if job.gpus in counts)
        by_size[bucket] += 1
    mix = ", ".join(f"{b} GPU: {by_size[b]}" for b, *_ in SIZES)
    gpus = machines * GPUS_PER_MACHINE
    flood = sum(job.gpus for job in jobs if job.workspace == "flood")
    return (
        f"{len(jobs)} runs on {machines} machines x {GPUS_PER_MACHINE} GPUs; submissions over"
        f" {hours(window)}; {demand / 3600:.0f} GPU-hours asked within it"
        f" ({demand / (gpus * window):.2f}x its capacity); the flood asks"
        f" {flood} GPUs at once ({flood / gpus:.1f}x the cluster); {mix};"
        f" median duration {hours(statistics.median(j.duration for j in jobs))}"
    )


def replay(
    jobs: Sequence[Job], machines: int, policy: Policy, window: float, tick: float
) -> Outcome:
    """`simulate` in an event loop of its own, in a worker process."""
    return asyncio.run(simulate(jobs, machines, policy, window, tick))


def run_all(args: argparse.Namespace) -> list[Outcome]:
    """Every policy over the same workload, `args.jobs` at a time; the table at the end."""
    machines, runs = args.machines, args.runs
    if args.small:
        machines, runs = 50, 200
    if args.smoke:
        machines, runs = 12, 40
    jobs = workload(runs, machines, args.load, args.seed)
    window = max(job.submit for job in jobs)
    print(describe(jobs, machines), flush=True)
    for policy in POLICIES:
        if not built(policy):
            print(f"{policy.name}: not built yet (Settings has no `{policy.needs}`)", flush=True)
    todo = [policy for policy in POLICIES if built(policy)]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max(1, args.jobs), mp_context=context) as pool:
        futures = {p.name: pool.submit(replay, jobs, machines, p, window, args.tick) for p in todo}
        done = {}
        for policy in todo:
            outcome = done[policy.name] = futures[policy.name].result()
            print(
                f"{policy.name}: {outcome.seconds:.0f} s, {outcome.passes} passes;"
                f" GPU-hours received/entitled: {shares(outcome)} ({load_average()})",
                flush=True,
            )
    columns = [done.get(policy.name, policy) for policy in POLICIES]
    print()
    print(table(columns))
    print(
        f"\n{describe_machine()}, {args.jobs} replay(s) at a time",
        flush=True,
    )
    return list(done.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--machines", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=6000)
    parser.add_argument(
        "--load", type=float, default=1.2, help="GPU-hours asked in the window / the cluster's"
    )
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--jobs", type=int, default=2, help="policies replayed at a time")
    parser.add_argument(
        "--tick", type=float, default=TICK, help="simulated seconds between passes, at least"
    )
    parser.add_argument("--small", action="store_true", help="50 machines, 200 runs")
    parser.add_argument(
        "--smoke", action="store_true", help="12 machines, 40 runs (the suite's check)"
    )
    run_all(parser.parse_args())


if __name__ == "__main__":
    main()
