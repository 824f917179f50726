"""Turns assignments into running workers and their ends into task updates."""

import logging
import os
import signal
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import SubprocessError
from typing import Any

from astraeus.shared import Assignment, LogChunk, MachineReport, TaskState
from astraeus.shared.assignment import MAX_LOG_CHUNKS
from astraeus.shared.clock import Clock, SystemClock

from ..environment import IMEX_CHANNEL0, WorkerEnvironmentError, worker_environment
from ..rendezvous import accelerate_note, users_own
from .accelerate import write_accelerate_config
from .launch import Launched, Launcher, promised
from .logs import CHUNK_BYTES, next_chunk
from .rendezvous_port import PortGate, own_port, port_free
from .spec import CannotStartError, Files, shim_spec
from .state import Outbox, StateDir, TaskRecord, read_json, write_json
from .users import WorkerUsers
from .workdir import UID_CURSOR, WorkRoot, default_work_root

log = logging.getLogger(__name__)

CANCELLED = "cancelled"
UNASSIGNED = "cancelled: no longer assigned by the coordinator"
TERMINATED = "stopped with SIGTERM"
KILLED = "killed with SIGKILL after the grace period"
REPORT_LOG_BYTES = 4 * 1024 * 1024
"""At most this much log in one report, across tasks, so a report stays a few MiB."""
MESSAGE_CHARS = 4096
"""The most a task update's message may hold."""
LOST = "exit status unknown: the worker ended while nothing was left to record it"


@dataclass
class RunnerConfig:
    stop_grace_seconds: float = 30.0
    imex_channel_path: str = IMEX_CHANNEL0
    container_runtime: Callable[[], str | None] = lambda: None
    """The container runtime that answered at the last check (`ContainerRuntimes.known`)."""
    uverbs: Callable[[], Mapping[str, str]] = dict
    agent_env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    env_passthrough: tuple[str, ...] = ()
    """Variables of the agent's environment that plain workers get too (`worker_env_passthrough`);
    beyond these a worker sees only `PATH`, `LANG` and `LC_*` of it."""
    users: WorkerUsers = field(default_factory=WorkerUsers.agents_own)
    work_root: Path | None = None
    """Where the tasks' working directories go; None: beside the state directory."""
    port_free: Callable[[int], bool] = port_free
    """Whether a rendezvous port is free here, checked before a worker 0 starts."""


class Runner:
    """Owns the task records: starts, watches and stops workers, and records every change."""

    def __init__(
        self,
        state: StateDir,
        outbox: Outbox,
        launcher: Launcher,
        config: RunnerConfig,
        clock: Clock | None = None,
    ) -> None:
        self.state, self.outbox, self.launcher = state, outbox, launcher
        self.config, self.clock = config, clock or SystemClock()
        self.records = {record.uid: record for record in state.records()}
        """Every task this agent knows, by `task_uid`: names repeat across workspaces."""
        self.shipped: dict[str, int] = {}
        self.work = WorkRoot(config.work_root or default_work_root(state.root))
        self.ports = PortGate(config.port_free)
        self._waiting: set[str] = set()
        """Tasks whose start waits for another worker to leave their GPUs (logged once)."""
        self._hand_over_old_updates()

    def sync(self, assignments: Iterable[Assignment], report: MachineReport) -> None:
        """Stop what is cancelled or no longer assigned, then start what is new, but never on a
        GPU that a live worker here still uses: a new task waits (Assigned) until every worker
        on its GPUs has exited, which a stop's grace period may take. Whatever brought the
        change (a restored backup, a reassignment, a takeover), no GPU ever has two workers."""
        wanted = {a.task_uid: a for a in assignments}
        self.ports.keep(wanted)
        new = []
        for uid, assignment in wanted.items():
            if uid not in self.records and self._adopt(assignment) is None:
                new.append(assignment)
        for uid, record in self.records.items():
            if uid not in wanted:
                self.stop(record, UNASSIGNED)
            elif wanted[uid].cancel:
                self.stop(record, CANCELLED, grace=wanted[uid].stop_grace_seconds)
        for assignment in new:
            if assignment.cancel:
                self._start(assignment, report)  # ends it Cancelled, unstarted
            elif not self._gpus_busy(assignment) and not self.ports.in_use(assignment):
                self._start(assignment, report)

    def _gpus_busy(self, assignment: Assignment) -> bool:
        """Whether a live worker here (running, or stopping within its grace) uses one of the
        GPUs `assignment` is given; said in the log once per task."""
        wanted = set(assignment.assigned_gpu_ids)
        holders = [
            record.task
            for record in self.records.values()
            if not record.state.ended and wanted & set(record.assignment.assigned_gpu_ids)
        ]
        if not holders:
            self._waiting.discard(assignment.task_uid)  # it starts now: nothing kept of it
        elif assignment.task_uid not in self._waiting:
            self._waiting.add(assignment.task_uid)
            log.info(
                "task %s waits for %s to exit: they still use its GPUs",
                assignment.task,
                ", ".join(sorted(holders)),
            )
        return bool(holders)

    def live_tasks(self) -> list[str] | None:
        """The uids of tasks whose worker runs here or is being stopped: what the coordinator
        must keep holding GPUs for. None (not said) while a task from before task uids waits
        for its real uid: a list without it would tell the coordinator its worker is gone."""
        live = [record for record in self.records.values() if not record.state.ended]
        if any(record.stand_in for record in live):
            return None
        return sorted(record.uid for record in live)

    def watch(self) -> bool:
        """Look at every live worker once; True when some task changed state."""
        changed = False
        for record in list(self.records.values()):
            if not record.state.ended:
                changed |= self._watch(record)
        self.launcher.reap()
        return changed

    def stop(
        self, record: TaskRecord, reason: str, *, fails: bool = False, grace: float | None = None
    ) -> None:
        """SIGTERM now; `watch` sends SIGKILL once the grace period is over: `grace` seconds
        when the coordinator chose it (a preempted run's `preemption_grace_seconds`), else
        `stop_grace_seconds`. `fails`: the task ends Failed (its time limit ran out) rather
        than Cancelled."""
        if record.state.ended or record.stop_reason is not None:
            return
        record.stop_reason, record.stop_fails = reason, fails
        record.stop_grace_seconds = grace
        if record.pid is None:
            self._end(record, TaskState.CANCELLED, message=f"{reason} before it started")
            return
        self.launcher.signal(record, signal.SIGTERM)
        record.term_sent_at = self.clock.now().timestamp()
        self.state.save(record)
        log.info("task %s: %s; SIGTERM sent", record.task, reason)

    def log_chunks(self) -> list[LogChunk]:
        """The next piece of every task's log that the coordinator has not received."""
        chunks, self.shipped, room = [], {}, REPORT_LOG_BYTES
        for record in self.records.values():
            if record.stand_in:
                continue  # the coordinator would not know it yet
            found = next_chunk(
                record.uid,
                self._files(record).log,
                record.log_shipped,
                final=record.state.ended,
                limit=min(CHUNK_BYTES, room),
            )
            if found:
                chunks.append(found[0])
                self.shipped[record.uid] = found[1]
                room -= found[1] - record.log_shipped
            if room <= 0 or len(chunks) >= MAX_LOG_CHUNKS:
                break  # the rest goes in the next report
        return chunks

    def logs_received(self) -> None:
        """The coordinator stored the chunks of the last report: move past them."""
        for uid, offset in self.shipped.items():
            record = self.records.get(uid)
            if record is not None:
                record.log_shipped = offset
                self.state.save(record)
        self.shipped.clear()

    def forget_finished(self, assigned: Iterable[str]) -> None:
        """Drop ended tasks whose updates and logs the coordinator has, and that it dropped too."""
        keep = set(assigned)
        unacked = {update.task_uid for update in self.outbox.pending}
        for uid, record in list(self.records.items()):
            done = record.state.ended and uid not in keep and uid not in unacked
            if done and (record.stand_in or self._logs_shipped(record)):
                self.work.remove(self._work_key(record))
                self.state.remove(record)
                del self.records[uid]

    def _hand_over_old_updates(self) -> None:
        """Updates from before task uids go to their (stand-in) tasks, to be sent on adoption."""
        by_name = {r.task: r for r in self.records.values() if r.stand_in}
        for update in self.outbox.from_before_uids:
            record = by_name.get(str(update.get("task")))
            if record is not None:
                record.replay = {k: v for k, v in update.items() if k not in ("seq", "task")}
                self.state.save(record)
        self.outbox.forget_from_before_uids()

    def _adopt(self, assignment: Assignment) -> TaskRecord | None:
        """The task of this workspace and name found from before task uids, now under the
        coordinator's uid (its folder stays where it is); None when there is none."""
        for stand_in, record in self.records.items():
            old = record.assignment
            if record.stand_in and (old.workspace, old.task) == (
                assignment.workspace,
                assignment.task,
            ):
                del self.records[stand_in]
                record.assignment, record.stand_in = assignment, False
                self.records[assignment.task_uid] = record
                replay, record.replay = record.replay, None
                self.state.save(record)
                if replay is not None:
                    self.outbox.add(assignment.task_uid, **replay)
                log.info("task %s (from before task uids) is task %s", record.task, record.uid)
                return record
        return None

    def _start(self, assignment: Assignment, report: MachineReport) -> None:
        record = TaskRecord(assignment=assignment)
        self.records[assignment.task_uid] = record
        if assignment.cancel:
            self._end(record, TaskState.CANCELLED, message=f"{CANCELLED} before it started")
            return
        self._set(record, TaskState.STARTING)
        try:
            launched = self._launch(record, report)
        except (WorkerEnvironmentError, CannotStartError, OSError, SubprocessError) as error:
            log.warning("task %s cannot start: %s", assignment.task, error)
            self._end(record, TaskState.FAILED, message=str(error))
            return
        record.launcher, record.unit = self.launcher.name, launched.unit
        record.pid, record.pid_start = launched.pid, launched.pid_start
        record.started_at = self.clock.now().timestamp()
        self.state.save(record)
        log.info("task %s started (%s, pid %d)", assignment.task, self.launcher.name, launched.pid)

    def _launch(self, record: TaskRecord, report: MachineReport) -> Launched:
        assignment = record.assignment
        busy = self.ports.runs_own_in_use(assignment)
        if busy is not None:
            raise CannotStartError(f"{busy} on machine {report.name}: the run cannot meet there")
        span = self.ports.span
        worker = worker_environment(
            assignment,
            report,
            imex_channel_path=self.config.imex_channel_path,
            uverbs=self.config.uverbs(),
            own_port=own_port(span) if assignment.rendezvous.master_port is None else None,
        )
        files = self._files(record)
        note_users_own(files.log, assignment.env, worker.env)
        key, cursor = self._work_key(record), self.state.root / UID_CURSOR
        where = self.work.prepare(key, self.config.users, worker.devices, cursor)
        runtime, agent_env = self.config.container_runtime(), self.config.agent_env
        spec = shim_spec(
            assignment,
            worker,
            files,
            where,
            agent_env=agent_env,
            runtime=runtime,
            passthrough=self.config.env_passthrough,
        )
        if assignment.image is None:
            write_accelerate_config(where, spec["env"])
            note_line(files.log, accelerate_note(spec["env"]))
        write_json(files.spec, spec)
        owed = promised(assignment, worker)
        return self.launcher.start(record, files.spec, files.log, worker.devices, span, owed)

    def _work_key(self, record: TaskRecord) -> str:
        """The working directory's name: the task folder's (its uid, or its name from before
        task uids)."""
        return self.state.task_dir(record).name

    def _watch(self, record: TaskRecord) -> bool:
        files = self._files(record)
        status = read_json(files.status)
        if status is not None:
            if record.state is TaskState.STARTING and files.started.exists():
                self._set(record, TaskState.RUNNING)
            self._ended_with(record, status)
            return True
        if not self.launcher.alive(record):
            self._ended_without_status(record)
            return True
        changed = False
        if record.state is TaskState.STARTING and files.started.exists():
            self._set(record, TaskState.RUNNING)
            changed = True
        self._enforce_limits(record)
        return changed

    def _enforce_limits(self, record: TaskRecord) -> None:
        now, limit = self.clock.now().timestamp(), record.assignment.time_limit_seconds
        started = record.started_at
        if limit is not None and started is not None and now - started >= limit:
            self.stop(record, f"time limit of {limit} s reached", fails=True)
        term = record.term_sent_at
        if term is not None and not record.kill_sent and now - term >= self._grace(record):
            self.launcher.signal(record, signal.SIGKILL)
            record.kill_sent = True
            self.state.save(record)
            log.info("task %s: grace period over; SIGKILL sent", record.task)

    def _grace(self, record: TaskRecord) -> float:
        """Seconds between SIGTERM and SIGKILL for this task's stop."""
        chosen = record.stop_grace_seconds
        return self.config.stop_grace_seconds if chosen is None else chosen

    def _ended_with(self, record: TaskRecord, status: dict[str, Any]) -> None:
        code, sig = status.get("exit_code"), status.get("signal")
        if record.stop_reason is not None:
            self._end_stopped(record, exit_code=code, signal=sig)
        elif status.get("message"):
            self._end(record, TaskState.FAILED, exit_code=code, message=status["message"])
        elif code == 0:
            self._end(record, TaskState.SUCCEEDED, exit_code=0)
        elif sig is not None:
            message = f"killed by signal {signal_name(sig)}"
            self._end(record, TaskState.FAILED, signal=sig, message=message)
        else:
            self._end(record, TaskState.FAILED, exit_code=code, message=f"exited with code {code}")

    def _ended_without_status(self, record: TaskRecord) -> None:
        if record.kill_sent:
            self._end_stopped(record, exit_code=None, signal=int(signal.SIGKILL))
        else:
            self._end(record, TaskState.LOST, message=LOST)

    def _end_stopped(
        self, record: TaskRecord, *, exit_code: int | None, signal: int | None
    ) -> None:
        reason = record.stop_reason or CANCELLED
        how = KILLED if record.kill_sent else TERMINATED
        state = TaskState.FAILED if record.stop_fails else TaskState.CANCELLED
        detail: dict[str, Any] = {"exit_code": exit_code, "signal": signal}
        self._end(record, state, message=f"{reason}; {how}", **detail)

    def _end(self, record: TaskRecord, state: TaskState, **detail: Any) -> None:
        record.ended_at = self.clock.now().timestamp()
        self._set(record, state, **detail)
        log.info("task %s %s %s", record.task, state.value, detail.get("message") or "")

    def _set(self, record: TaskRecord, state: TaskState, **detail: Any) -> None:
        if detail.get("message"):
            detail["message"] = detail["message"][:MESSAGE_CHARS]
        record.state = state
        at = self.clock.now()
        if record.stand_in:
            # Its uid is not the coordinator's yet: the latest state waits for adoption.
            record.replay = {"state": state.value, "at": at.isoformat(), **detail}
            self.state.save(record)
            return
        self.state.save(record)
        self.outbox.add(record.uid, state, at, **detail)

    def _files(self, record: TaskRecord) -> Files:
        path = self.state.path
        return Files(
            spec=path(record, "spec.json"),
            log=path(record, "output.log"),
            started=path(record, "started.json"),
            status=path(record, "status.json"),
        )

    def _logs_shipped(self, record: TaskRecord) -> bool:
        log_file = self._files(record).log
        return not log_file.exists() or record.log_shipped >= log_file.stat().st_size


def note_users_own(log_file: Path, user_env: Mapping[str, str], placed: Mapping[str, str]) -> None:
    """One line at the top of the task's log when the run's `env` sets rendezvous variables
    of its own: they win over the placement's, and the user should see that they did."""
    notes = users_own(user_env, placed)
    if notes:
        note_line(
            log_file, f"astraeus: the run's env sets {', '.join(notes)}; the run's values are used"
        )


def note_line(log_file: Path, line: str | None) -> None:
    """A line of the agent's own in the task's log, before the worker writes any."""
    if line is not None:
        with log_file.open("a", encoding="utf-8") as out:
            out.write(line + "\n")


def signal_name(number: int) -> str:
    """`SIGSEGV` for 11; the number itself for one Python has no name for (real-time signals)."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)
