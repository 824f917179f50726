"""Queue policies side by side: one workload replayed through the real scheduler (the queue walk,
fair share, holds and backfill, preemption, the placement engine over a real SQLite store) on a
simulated clock, once per policy, and the figures printed in one table per workload.

    .venv/bin/python benchmarks/policy_sim.py                      # 1,000 machines, 12,000 runs
    .venv/bin/python benchmarks/policy_sim.py --flood-runs 1000 7200   # and the 60 % flood
    .venv/bin/python benchmarks/policy_sim.py --jobs 1             # one policy at a time
    .venv/bin/python benchmarks/policy_sim.py --small              # 50 machines, 600 runs
    .venv/bin/python benchmarks/policy_sim.py --smoke              # 12 machines, 40 runs

Policies (coordinator settings `fair_share`, `backfill`, `preemption`):

- FIFO: `fair_share = false`, `backfill = false`, `preemption = "off"`: priority, then submission
  time, as before issue 28, except that holds are now per set of machines (no setting restores
  the one cluster-wide head: see docs/benchmarks.md);
- fair share: `fair_share = true` (usage with the 7-day half-life; every weight 1 unless
  `--weights machines`);
- fair share + backfill: both on (the defaults);
- all + preemption: both on and `preemption = "priority"`; printed as "not built yet" on a
  coordinator whose `Settings` has no `preemption` field.

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
The replay stops once every run has started at least once (the window ends at the last
submission, so it is over by then): nothing later changes a figure.

The workload (seeded; the same for every policy), from published figures only:

- GPUs and duration of each run: the Philly trace (Microsoft; Jeon et al., "Analysis of
  Large-Scale Multi-Tenant GPU Clusters for DNN Training Workloads", USENIX ATC 2019; trace at
  github.com/msr-fiddle/philly-traces) as Gavel (Narayanan et al., OSDI 2020) samples it, read in
  `scheduler/utils.py`, functions `_generate_scale_factor` and `_generate_duration`, "Sample ...
  from the Philly distribution" (github.com/adarshps22/gavel at commit 1a49399, a fork of
  github.com/stanford-futuredata/gavel): 70 % of runs on 1 GPU, 10 % on 2, 15 % on 4, 5 % on 8
  (`PHILLY_GPUS`); a duration of 10**U(1.5, 3) minutes for 80 % of runs and 10**U(3, 4) minutes
  for the rest (`PHILLY_DURATIONS`: 31.6 minutes to 6.9 days, median 4.6 hours, mean 16.8
  hours). No run asks more than 8 GPUs: that parametrisation has none (the Philly paper's
  buckets have a ">8"; its share was not read anywhere, so none is invented here).
- Tenants: the steady workspaces are Philly's 11 virtual clusters, each submitting in proportion
  to its machines (`PHILLY_VCS`: 64, 64, 64, 32, 32, 32, 16, 16, 16, 8 and 8), as Helios' replay
  of Philly configures them (Hu et al., SC 2021; github.com/S-Lab-System-Group/HeliosArtifact,
  `framework/QSSF Service/data/philly_vc.csv`); the `flood` workspace submits `--flood-runs`
  runs (default: issue 28's 1,000 in 12,000) within its first `FLOOD_SECONDS`, as a team
  submitting 1,000 runs at 6 am does. This script's own choices, not the trace's:
  `PRIORITY_SHARE` (3 %) of the steady runs have priority 100 (what preemption acts on); time
  limits are the duration times `LIMIT_FACTOR` (2) rounded up to the next of `LIMIT_STEPS`
  (30 min ... 7 days), as people over-ask in round numbers; every weight is 1 (`--weights
  equal`, the default) or, with `--weights machines`, each virtual cluster's machines
  (`weights`).
- Arrivals: the steady runs arrive at random over the window (Poisson): the longest window in
  which all the runs ask `--load` (1.2) times the cluster's GPU-hours, counting of each run only
  the part of its duration before the window ends, so the cluster is oversubscribed throughout,
  not only at the start. With Philly's long runs, 6,000 runs on 1,000 machines ask at most 0.8
  times the cluster (over 51 minutes): 12,000 is the default, the round count that keeps the
  issue's 1,000 machines oversubscribed for hours (4.9 h).

Figures, all over the window from the first submission to the last, read from what the
simulated agents saw (a run placed again after preemption overwrites its task rows):

- GPU utilisation: GPU-seconds held by workers in the window / (GPUs x window);
- wait: from submission until the run's first worker started (the pass that placed it), for
  every run; mean, p95, p95 of 1-GPU runs, and p95 of the steady workspaces' runs and of the
  flood's apart (fair share moves waiting between them; it cannot shorten the time the whole
  backlog takes);
- Jain's fairness index over workspaces of x = GPU-hours received in the window / GPU-hours the
  workspace was entitled to there: its demand in the window (each run's GPUs x the part of its
  duration that fits before the window ends) shared out max-min (water-filling) over the
  window's capacity, weighted by the fair-share weights (all 1 by default: plain max-min). 1
  is perfectly fair, 1/n is one workspace taking it all.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import heapq
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
from datetime import UTC, datetime
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

PHILLY_GPUS: tuple[tuple[int, float], ...] = ((1, 0.70), (2, 0.10), (4, 0.15), (8, 0.05))
"""GPUs per run and the share of runs asking them: the Philly distribution as Gavel samples it
(`_generate_scale_factor`: 1 GPU below 0.7, 2 below 0.8, 4 below 0.95, else 8; see the module's
docstring for where it was read). No run asks more than 8 GPUs there."""
PHILLY_DURATIONS: tuple[tuple[float, float, float], ...] = ((0.8, 1.5, 3.0), (0.2, 3.0, 4.0))
"""(share, low, high): a run lasts 10**U(low, high) minutes, the exponent uniform (Gavel's
`_generate_duration`: 31.6 minutes to 16.7 hours for 80 % of runs, 16.7 hours to 6.9 days for
the rest), drawn apart from its GPUs as there."""
PHILLY_VCS: tuple[tuple[str, int], ...] = (
    ("6214e9", 64),
    ("7f04ca", 32),
    ("11cb48", 16),
    ("b436b2", 64),
    ("ee9e8c", 64),
    ("e13805", 16),
    ("6c71a0", 32),
    ("2869ce", 16),
    ("ed69ec", 8),
    ("103959", 8),
    ("0e4a51", 32),
)
"""Philly's virtual clusters (hashes as in the trace) and their machines, from Helios' replay of
Philly (`philly_vc.csv`): the steady workspaces, each submitting in proportion to its size."""
BUCKETS: tuple[tuple[str, int, int], ...] = (
    ("1", 1, 1),
    ("2-4", 2, 4),
    ("5-8", 5, 8),
    (">8", 9, 10**6),
)
"""The GPU-count buckets of the Philly paper's Figure 2 and its trace's notebook, for the
summary line."""
DEFAULT_RUNS = 12000
DEFAULT_FLOOD_RUNS = 1000
"""Issue 28's "a workspace that submits 1,000 runs at 6 am"; other sizes keep its share."""
WEIGHTS = ("equal", "machines")
"""`--weights`: every `fair_share_weight` 1 (the default), or each workspace's in proportion to
its virtual cluster's machines (`weights`)."""
SMALL = (50, 600)
SMOKE = (12, 40)
"""Machines and runs of `--small` and `--smoke`: the default's 12 runs a machine at `--small`
(so its cluster is oversubscribed too); a few runs at `--smoke`, which only checks it runs."""
LIMIT_FACTOR = 2.0
LIMIT_STEPS = tuple(int(h * 3600) for h in (0.5, 1, 2, 4, 8, 12, 24, 48, 72, 120, 168))
"""Time limits people type: 30 min, 1 h, 2 h, 4 h, 8 h, 12 h, 1, 2, 3, 5 and 7 days."""
FLOOD = "flood"
FLOOD_SECONDS = 15 * 60.0
STEADY = tuple(f"vc-{vc}" for vc, _machines in PHILLY_VCS)
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
    """GPUs and duration (seconds) of one run, drawn apart as Gavel draws them from Philly's
    distribution: `PHILLY_GPUS`, then `PHILLY_DURATIONS` (a log-uniform span of minutes)."""
    gpus = rng.choices([g for g, _ in PHILLY_GPUS], weights=[w for _, w in PHILLY_GPUS])[0]
    spans = [(low, high) for _share, low, high in PHILLY_DURATIONS]
    low, high = rng.choices(spans, weights=[share for share, *_ in PHILLY_DURATIONS])[0]
    return gpus, 60.0 * 10 ** rng.uniform(low, high)


def flood_default(runs: int) -> int:
    """The flood's runs when not given: the issue's 1,000 of the default 12,000, in proportion."""
    return round(runs * DEFAULT_FLOOD_RUNS / DEFAULT_RUNS)


def workload(runs: int, machines: int, load: float, seed: int, flood: int) -> list[Job]:
    """`runs` runs: `flood` of them the flood's, within its first `FLOOD_SECONDS`; the rest
    the steady workspaces' (one per Philly virtual cluster, drawn in proportion to its size),
    spread evenly at random over the window: Poisson arrivals. The window is the longest in
    which the runs ask `load` times the cluster's GPU-seconds: each run's GPUs x the part of
    its duration before the window ends (`asked_within`). With too few runs for that, the
    window where they ask the most."""
    if not 0 <= flood <= runs:
        raise ValueError(f"--flood-runs {flood}: must be from 0 to the {runs} runs")
    rng = random.Random(seed)  # noqa: S311 - a reproducible workload, not a secret
    sizes = [machines for _vc, machines in PHILLY_VCS]
    drawn = []
    for i in range(runs):
        gpus, duration = draw_size(rng)
        steady = i >= flood
        at = rng.random()
        workspace = rng.choices(STEADY, weights=sizes)[0] if steady else FLOOD
        priority = HIGH_PRIORITY if steady and rng.random() < PRIORITY_SHARE else 0
        drawn.append((i, gpus, duration, workspace, at, priority))

    def jobs_in(window: float) -> list[Job]:
        return [
            Job(
                f"r{i}",
                workspace,
                at * (FLOOD_SECONDS if workspace == FLOOD else window),
                gpus,
                duration,
                time_limit(duration),
                priority,
            )
            for i, gpus, duration, workspace, at, priority in drawn
        ]

    capacity = machines * GPUS_PER_MACHINE
    windows = [FLOOD_SECONDS * 1.05**k for k in range(200)]  # 15 minutes to ~4 years
    ratios = [asked_within(jobs_in(w), w) / (capacity * w) for w in windows]
    enough = [w for w, ratio in zip(windows, ratios, strict=True) if ratio >= load]
    window = max(enough) if enough else windows[ratios.index(max(ratios))]
    jobs = jobs_in(window)
    jobs.sort(key=lambda job: job.submit)
    return jobs


def weights(mode: str, jobs: Sequence[Job]) -> dict[str, float]:
    """Each workspace's `fair_share_weight` under `--weights`. `equal`: 1 each. `machines`: a
    virtual cluster's machines, as an operator gives Slurm accounts shares in proportion to what
    they paid for (Philly's virtual clusters' sizes are their quotas); the flood, which is no
    virtual cluster, weighs as one submitting as many runs would (the steady runs are drawn in
    proportion to the machines): 32 at the issue's 1,000 of 12,000. This script's choice, set
    before any replay and never tuned to a result."""
    if mode == "equal":
        return {workspace: 1.0 for workspace in (FLOOD, *STEADY)}
    if mode != "machines":
        raise ValueError(f"--weights {mode}: must be one of {', '.join(WEIGHTS)}")
    by_vc = {f"vc-{vc}": float(machines) for vc, machines in PHILLY_VCS}
    flood = sum(1 for job in jobs if job.workspace == FLOOD)
    steady = len(jobs) - flood
    total = sum(by_vc.values())
    by_vc[FLOOD] = round(total * flood / steady, 1) if steady else 1.0
    return by_vc


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
class Span:
    """One worker's hold on GPUs, as its simulated agent saw it: from the pass that assigned
    it (the agent starts it at that same simulated instant) until the agent reported it gone.
    Read from the agents, not the task rows: a preempted run placed again overwrites its row's
    `assigned_at`, which would lose its first attempt's GPU-seconds and first placement."""

    workspace: str
    gpus: int
    start: float
    end: float | None = None


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
    started: int
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
        self,
        jobs: Sequence[Job],
        machines: int,
        policy: Policy,
        folder: Path,
        tick: float,
        weighting: str = "equal",
    ):
        self.jobs = list(jobs)
        self.weights = weights(weighting, jobs)
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
        self.spans: dict[str, Span] = {}
        """Every worker started, by task uid (a fresh uid per placement)."""
        self.first_start: dict[str, float] = {}
        """Run name -> when its first worker started: its wait ends there."""
        self.submitted: dict[str, float] = {}
        """Run name -> when it was stored: the pass tick its submission fell in."""
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
                self.spans[uid].end = self.at()
                changed = True
        for uid, assignment in wanted.items():
            if uid in agent.running or assignment.cancel:
                continue
            job = self.by_name[assignment.run]
            end = self.at() + job.duration
            agent.running[uid] = end
            self.spans[uid] = Span(job.workspace, len(assignment.assigned_gpu_ids), self.at())
            self.first_start.setdefault(job.name, self.at())
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
                self.spans[uid].end = self.at()
                due.add(machine)
        for name in sorted(due):
            await self.sync(self.agents[name])

    async def run(self) -> None:
        self.store.database.start_writer()
        try:
            await self._replay()
        finally:
            self.store.database.stop_writer()

    async def _replay(self) -> None:
        now = self.clock.now()
        for workspace in (FLOOD, *STEADY):
            body = WorkspaceSpec(name=workspace, fair_share_weight=self.weights[workspace])
            self.store.workspaces.put(body, now)
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
                self.submitted[job.name] = self.at()
                next_arrival += 1
            await self.scheduler.run_pass()
            self.passes += 1
            await self.settle(self.stale())
            upcoming = []
            if next_arrival < len(arrivals):
                upcoming.append(arrivals[next_arrival].submit)
            if self.ends:
                upcoming.append(self.ends[0][0])
            if next_arrival == len(arrivals) and len(self.first_start) == len(self.jobs):
                return  # the window is over (it ends at the last submission): no figure changes
            if not upcoming:
                raise RuntimeError(
                    f"{self.policy.name}: {len(self.jobs) - len(self.first_start)} runs wait"
                    " with nothing running and nothing left to submit"
                )
            step = max(min(upcoming) - self.at(), self.tick)
            self.clock.advance(math.ceil(step / self.tick) * self.tick)

    def measure(self, window: float, seconds: float) -> Outcome:
        """The figures over [START, START + window] (see the module's docstring)."""
        held: dict[str, float] = defaultdict(float)
        for span in self.spans.values():
            stop = window if span.end is None else min(span.end, window)
            if stop > span.start:
                held[span.workspace] += span.gpus * (stop - span.start)
        gpus = len(self.agents) * GPUS_PER_MACHINE
        waits: list[float] = []
        one_gpu: list[float] = []
        steady: list[float] = []
        flood: list[float] = []
        for job in self.jobs:
            wait = self.first_start[job.name] - self.submitted[job.name]
            waits.append(wait)
            if job.gpus == 1:
                one_gpu.append(wait)
            (flood if job.workspace == FLOOD else steady).append(wait)
        demand: dict[str, float] = defaultdict(float)
        for job in self.jobs:
            demand[job.workspace] += job.gpus * max(0.0, min(job.duration, window - job.submit))
        entitled = water_fill(demand, gpus * window, self.weights)
        preemptions, stopped = preemption_totals(self.store.database)
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
            started=len(self.first_start),
            preemptions=preemptions,
            stopped=stopped,
            passes=self.passes,
            seconds=seconds,
            received=dict(held),
            entitled=entitled,
        )


def water_fill(
    demand: dict[str, float], capacity: float, weights: dict[str, float] | None = None
) -> dict[str, float]:
    """Weighted max-min fair shares of `capacity`: every workspace gets its demand or its
    weight's part of what is left, whichever is less, the rest going to those that want more.
    Without `weights`, every weight is 1 (plain max-min)."""
    weight = weights or {}
    shares: dict[str, float] = {}
    left = dict(demand)
    room = capacity
    while left:
        each = room / sum(weight.get(w, 1.0) for w in left)
        small = {w: d for w, d in left.items() if d <= each * weight.get(w, 1.0)}
        if not small:
            shares.update({w: each * weight.get(w, 1.0) for w in left})
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
    jobs: Sequence[Job],
    machines: int,
    policy: Policy,
    window: float,
    tick: float = TICK,
    weighting: str = "equal",
) -> Outcome:
    folder = Path(tempfile.mkdtemp(prefix="astraeus-policy-"))
    started = time.perf_counter()
    try:
        sim = Simulation(jobs, machines, policy, folder, tick, weighting)
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
        ("runs started / submitted", lambda o: f"{o.started} / {o.runs}"),
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
    """The workload in one paragraph: its size, load, mix of GPUs and durations, tenants."""
    window = max(job.submit for job in jobs)
    demand = asked_within(jobs, window)
    by_size: dict[str, int] = defaultdict(int)
    for job in jobs:
        bucket = next(b for b, low, high in BUCKETS if low <= job.gpus <= high)
        by_size[bucket] += 1
    mix = ", ".join(f"{b} GPU: {by_size[b]}" for b, *_ in BUCKETS)
    gpus = machines * GPUS_PER_MACHINE
    flood = [job for job in jobs if job.workspace == FLOOD]
    asked = sum(job.gpus for job in flood)
    tenants: dict[str, int] = defaultdict(int)
    for job in jobs:
        tenants[job.workspace] += 1
    per = ", ".join(f"{w} {tenants[w]}" for w in (FLOOD, *STEADY) if tenants[w])
    urgent = sum(1 for job in jobs if job.priority > 0)
    return (
        f"{len(jobs)} runs on {machines} machines x {GPUS_PER_MACHINE} GPUs; submissions over"
        f" {hours(window)}; {demand / 3600:.0f} GPU-hours asked within it"
        f" ({demand / (gpus * window):.2f}x its capacity); the flood's {len(flood)} runs ask"
        f" {asked} GPUs at once ({asked / gpus:.2f}x the cluster); {mix};"
        f" median duration {hours(statistics.median(j.duration for j in jobs))}, mean"
        f" {hours(statistics.fmean(j.duration for j in jobs))}; runs by workspace: {per};"
        f" {urgent} of priority {HIGH_PRIORITY}"
    )


def replay(
    jobs: Sequence[Job], machines: int, policy: Policy, window: float, tick: float, weighting: str
) -> Outcome:
    """`simulate` in an event loop of its own, in a worker process."""
    return asyncio.run(simulate(jobs, machines, policy, window, tick, weighting))


def run_all(args: argparse.Namespace) -> list[Outcome]:
    """Every policy over each workload (one per `--flood-runs`), `args.jobs` at a time; a
    table per workload."""
    machines, runs = args.machines, args.runs
    if args.small:
        machines, runs = SMALL
    if args.smoke:
        machines, runs = SMOKE
    outcomes: list[Outcome] = []
    for flood in args.flood_runs or [flood_default(runs)]:
        if not 0 <= flood <= runs:
            raise SystemExit(f"--flood-runs {flood}: must be from 0 to the {runs} runs")
        outcomes += run_workload(args, machines, runs, flood)
    return outcomes


def run_workload(args: argparse.Namespace, machines: int, runs: int, flood: int) -> list[Outcome]:
    """Every policy over one workload; its table at the end."""
    jobs = workload(runs, machines, args.load, args.seed, flood)
    window = max(job.submit for job in jobs)
    print(f"\n## {flood} flood runs of {runs}\n", flush=True)
    print(describe(jobs, machines), flush=True)
    if args.weights != "equal":
        given = weights(args.weights, jobs)
        listed = ", ".join(f"{w} {given[w]:g}" for w in (FLOOD, *STEADY))
        print(f"fair-share weights and Jain's entitlements by {args.weights}: {listed}")
    for policy in POLICIES:
        if not built(policy):
            print(f"{policy.name}: not built yet (Settings has no `{policy.needs}`)", flush=True)
    todo = [policy for policy in POLICIES if built(policy)]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max(1, args.jobs), mp_context=context) as pool:
        futures = {
            p.name: pool.submit(replay, jobs, machines, p, window, args.tick, args.weights)
            for p in todo
        }
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
    print(f"\n{describe_machine()}, {args.jobs} replay(s) at a time", flush=True)
    return list(done.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--machines", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS)
    parser.add_argument(
        "--flood-runs",
        type=int,
        nargs="+",
        help="the flood workspace's runs, one workload (and table) per value; default: the"
        f" issue's {DEFAULT_FLOOD_RUNS} in {DEFAULT_RUNS} runs, the same share at other sizes",
    )
    parser.add_argument(
        "--load", type=float, default=1.2, help="GPU-hours asked in the window / the cluster's"
    )
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--jobs", type=int, default=2, help="policies replayed at a time")
    parser.add_argument(
        "--tick", type=float, default=TICK, help="simulated seconds between passes, at least"
    )
    parser.add_argument(
        "--weights",
        choices=WEIGHTS,
        default="equal",
        help="fair-share weights, and the weights of Jain's entitlements (weighted max-min):"
        " all 1, or each virtual cluster's machines (see `weights`)",
    )
    parser.add_argument("--small", action="store_true", help="50 machines, 600 runs")
    parser.add_argument(
        "--smoke", action="store_true", help="12 machines, 40 runs (the suite's check)"
    )
    run_all(parser.parse_args())


if __name__ == "__main__":
    main()
