"""`GET /metrics`: Prometheus text format, written by hand (a handful of gauges, two histograms)."""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from astraeus.coordinator.machine_records import takes_runs
from astraeus.coordinator.store.preemption import preemption_totals
from astraeus.coordinator.store.usage import gpu_seconds_totals
from astraeus.shared import GpuHealthState, MachineState

if TYPE_CHECKING:
    from astraeus.coordinator.machine_records import MachineRecords
    from astraeus.coordinator.store import Store

SHED_LOOP = "event_loop"
SHED_WRITER = "writer"
"""Where a shed report would have waited: the event loop, or the database writer thread."""

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class Histogram:
    def __init__(self, name: str, help_text: str) -> None:
        self.name = name
        self.help = help_text
        self.counts = [0] * (len(BUCKETS) + 1)
        self.total = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(BUCKETS, value)] += 1
        self.total += value
        self.count += 1

    def lines(self) -> list[str]:
        out = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        running = 0
        for bound, count in zip(BUCKETS, self.counts, strict=False):
            running += count
            out.append(f'{self.name}_bucket{{le="{bound}"}} {running}')
        out.append(f'{self.name}_bucket{{le="+Inf"}} {self.count}')
        out.append(f"{self.name}_sum {self.total}")
        out.append(f"{self.name}_count {self.count}")
        return out


class Metrics:
    """Counters the scheduler feeds; the rest is read from the store when scraped."""

    def __init__(self) -> None:
        self.pass_seconds = Histogram(
            "astraeus_scheduler_pass_seconds", "Time for one scheduler pass, snapshot to commit."
        )
        self.placement_latency = Histogram(
            "astraeus_placement_latency_seconds",
            "Time from submission (or requeue after a fault) to placement, per run.",
        )
        self.reports_shed: Counter[str] = Counter({SHED_LOOP: 0, SHED_WRITER: 0})
        """Reports refused for overload, by the queue that ran behind."""

    def observe_pass(
        self, seconds: float, submitted_at: Iterable[datetime | None], now: datetime
    ) -> None:
        """A pass's duration, and the time from submission to this pass of each run placed."""
        self.pass_seconds.observe(seconds)
        for submitted in submitted_at:
            if submitted is not None:
                self.placement_latency.observe(max((now - submitted).total_seconds(), 0.0))

    def render(
        self,
        store: Store,
        records: MachineRecords,
        now: datetime,
        down_after: timedelta,
        heard_since: datetime,
    ) -> str:
        lines: list[str] = []
        runs = store.runs.counts_by_state()
        lines += _gauge(
            "astraeus_runs", "Runs by state.", [({"state": s}, n) for s, n in sorted(runs.items())]
        )
        pending = store.runs.pending_kinds()
        lines += _gauge(
            "astraeus_pending_runs",
            "Pending runs by kind of reason.",
            [({"reason": kind.value}, n) for kind, n in sorted(pending.items())],
        )
        lines += self._machines(store, records, now, down_after, heard_since)
        lines += self.pass_seconds.lines() + self.placement_latency.lines()
        name = "astraeus_reports_shed_total"
        lines += [
            f"# HELP {name} Agents' reports refused at once (503) because the coordinator ran"
            " too far behind, by the queue that did; their machines still count as heard.",
            f"# TYPE {name} counter",
        ]
        for queue, count in sorted(self.reports_shed.items()):
            lines.append(f'{name}{{queue="{queue}"}} {count}')
        lines += _storage(store)
        lines += _leadership(store)
        lines += _preemptions(store)
        lines += _workspace_gpu_seconds(store)
        return "\n".join(lines) + "\n"

    def _machines(
        self,
        store: Store,
        records: MachineRecords,
        now: datetime,
        down_after: timedelta,
        heard_since: datetime,
    ) -> list[str]:
        states: Counter[str] = Counter({MachineState.UP.value: 0, MachineState.DOWN.value: 0})
        gpus: Counter[tuple[str, str]] = Counter()
        used = store.runs.held_gpu_ids()
        for record in records.all():
            state = record.state(now, down_after, heard_since)
            states[state.value] += 1
            if record.report is None or state == MachineState.DOWN:
                continue
            usable = takes_runs(state, record)
            for gpu in record.report.gpus:
                found = _gpu_state(gpu.health.state, (record.name, gpu.uuid) in used)
                gpus[(gpu.model, found if found != "free" or usable else "idle")] += 1
        lines = _gauge(
            "astraeus_machines",
            "Machines by state.",
            [({"state": s}, n) for s, n in sorted(states.items())],
        )
        lines += _gauge(
            "astraeus_gpus",
            "GPUs on Up machines by model and state: free (a run could be given it now), idle"
            " (held by no task, on a machine that takes no runs now: cordoned or under memory"
            " or disk pressure), used, at_risk, faulted.",
            [({"model": m, "state": s}, n) for (m, s), n in sorted(gpus.items())],
        )
        return lines


def _preemptions(store: Store) -> list[str]:
    """Preemptions (a run stopping lower-priority runs to start), and the runs they stopped."""
    count, victims = preemption_totals(store.database)
    lines = []
    for name, text, value in (
        ("astraeus_preemptions_total", "Runs that stopped lower-priority runs to start.", count),
        ("astraeus_preempted_runs_total", "Runs stopped for a higher-priority run.", victims),
    ):
        lines += [f"# HELP {name} {text}", f"# TYPE {name} counter", f"{name} {value}"]
    return lines


def _workspace_gpu_seconds(store: Store) -> list[str]:
    """Raw GPU-seconds held per workspace since usage was first counted (`store/usage.py`)."""
    name = "astraeus_workspace_gpu_seconds_total"
    lines = [
        f"# HELP {name} GPU-seconds held by the workspace's tasks, counted at each pass.",
        f"# TYPE {name} counter",
    ]
    for workspace, seconds in gpu_seconds_totals(store.database):
        lines.append(f'{name}{{workspace="{_escape(workspace)}"}} {seconds:.15g}')
    return lines


def _storage(store: Store) -> list[str]:
    """Whether the file takes writes, and the writes it refused (disk full, read-only, I/O)."""
    database = store.database
    lines = _gauge(
        "astraeus_database_writable",
        "1 while the database takes writes, 0 during a storage fault.",
        [({}, int(database.fault is None))],
    )
    name = "astraeus_database_write_failures_total"
    lines += [
        f"# HELP {name} Writes the storage refused since the start, by problem.",
        f"# TYPE {name} counter",
    ]
    for problem, count in sorted(database.write_failures.items()):
        lines.append(f'{name}{{problem="{_escape(problem)}"}} {count}')
    return lines


def _leadership(store: Store) -> list[str]:
    """This coordinator leads (a standby's metrics say 0: `standby.py`), and on PostgreSQL
    its fencing epoch: a jump of it on one coordinator's series shows a takeover."""
    lines = _gauge(
        "astraeus_coordinator_leader",
        "1 while this coordinator leads (places and answers the API), 0 while it stands by.",
        [({}, 1)],
    )
    epoch = store.database.epoch
    if epoch is not None:
        lines += _gauge(
            "astraeus_coordinator_epoch",
            "The leader's fencing epoch: one more at each takeover (PostgreSQL).",
            [({}, epoch)],
        )
    return lines


def _gpu_state(health: GpuHealthState, used: bool) -> str:
    if health == GpuHealthState.FAULTED:
        return "faulted"
    if used:
        return "used"
    return "at_risk" if health == GpuHealthState.AT_RISK else "free"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _gauge(name: str, help_text: str, samples: list[tuple[dict[str, str], int]]) -> list[str]:
    out = [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
    for labels, value in samples:
        rendered = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
        out.append(f"{name}{{{rendered}}} {value}" if rendered else f"{name} {value}")
    return out
