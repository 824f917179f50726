"""Receiving an agent's report: the one path from `PUT /machines/{name}/report` to its reply.

The API handler checks the token and reads the body; `Reports.receive` does the rest: a plain
heartbeat is kept in memory (`MachineRecords.heartbeat`), a report that writes is stored with its
task updates and log chunks in one transaction on the writer thread, each update moving its task
as `domain/lifecycle.py` says; ports the agent found busy are taken back; what the agent says it
runs settles its machine's tasks (started ones it runs no worker for end Lost, Lost ones still
holding GPUs there are released); and the reply's assignments are built with
`domain/rendezvous.py`. It says whether the scheduler should run a pass soon.

Tasks on machines silent too long end Lost here too (`mark_silent`, called by each pass), so which
machines hold GPUs for Lost tasks (`holding`) is known without a query per report.

A report refused (its write failed on a storage fault, or it would wait on the writer thread
longer than `max_delay`: `OverloadError`) still counts as heard: its machine's `last_seen` moves
in memory (`MachineRecords.heard`), so a machine that keeps reporting is never shown Down for
the coordinator's trouble. Nothing of it is acknowledged: its agent sends it again."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from astraeus.coordinator.domain.lifecycle import (
    FORGOTTEN,
    FORGOTTEN_NOTE,
    NO_WORKER,
    Move,
    WorkerEnd,
    ends_lost_without_worker,
    failed,
    gpu_fault,
    late_end_note,
    move,
    requeues,
    requeues_preempted,
    run_state,
    stops_the_rest,
)
from astraeus.coordinator.domain.rendezvous import Worker, rendezvous
from astraeus.coordinator.machine_records import MachineRecord, MachineRecords
from astraeus.coordinator.store import StorageError, Store
from astraeus.coordinator.store.agents import (
    gpus_held_on,
    held_on,
    live_tasks_on,
    task_names,
    updated_task,
    write_end,
    write_forward,
    write_lost,
    write_lost_freed,
    write_lost_held,
    write_release,
)
from astraeus.coordinator.store.db import Row
from astraeus.coordinator.store.dialect import Connection
from astraeus.coordinator.store.machines import Machines
from astraeus.coordinator.store.port_rows import refuse_ports
from astraeus.coordinator.store.runs import (
    RunTasks,
    failure_text,
    requeue,
    run_tasks,
    stop_live_tasks,
    submitted_name,
    write_run_state,
)
from astraeus.coordinator.store.tokens import Tokens
from astraeus.shared import (
    AgentReport,
    Assignment,
    GpuHealthState,
    MachineReport,
    Mount,
    NetworkKind,
    Rendezvous,
    RunState,
    TaskState,
    TaskUpdate,
)
from astraeus.shared.machines import ForgottenMachine
from astraeus.shared.reasons import PREEMPTED

if TYPE_CHECKING:  # the scheduler package imports this module
    from astraeus.coordinator.scheduler.port_grants import Ports

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class Stale:
    """What a machine's stored tasks must lose to agree with the workers its agent runs."""

    lost: list[int]
    """Started tasks its agent runs no worker for: they end Lost (`NO_WORKER`)."""
    released: list[int]
    """Lost tasks still holding GPUs there whose worker is gone: their GPUs return."""


@dataclass(frozen=True)
class Received:
    """What a report comes to: the machine's new record, the reply's assignments, and whether
    the scheduler should run a pass soon (a task ended, GPUs or a port came back, or what the
    machine reports about its hardware changed)."""

    record: MachineRecord
    assignments: list[Assignment]
    poke: bool


class OverloadError(Exception):
    """A report refused because the coordinator runs too far behind; the text says how far."""

    def __init__(self, where: str, seconds: float) -> None:
        super().__init__(
            f"the coordinator is overloaded ({where} {seconds:.2f} s behind): this report was"
            " not processed; send it again after Retry-After"
        )
        self.seconds = seconds


class Reports:
    """Agents' reports received, and the tasks they end; over the store, the machines' records
    and the rendezvous ports. `max_delay`: seconds a report may wait behind the writer
    thread's queue before it is refused (`OverloadError`); 0: never refused."""

    def __init__(
        self, store: Store, records: MachineRecords, ports: Ports, max_delay: float = 0.0
    ) -> None:
        self._store = store
        self.records = records
        self.ports = ports
        self.max_delay = max_delay
        self.holding: set[str] = store.agents.holding()
        """Machines with Lost tasks whose GPUs are still held (see `_stale`)."""

    async def receive(self, body: AgentReport, address: str | None, now: datetime) -> Received:
        """Store the report (in memory only, for a plain heartbeat), take back the ports its
        agent found busy, settle its machine's tasks with what the agent says it runs, and
        build the reply's assignments. Refused (`StorageError`, `OverloadError`), its machine
        still counts as heard."""
        try:
            return await self._receive(body, address, now)
        except (StorageError, OverloadError):
            self.records.heard(body.report.name, now)
            raise

    async def _receive(self, body: AgentReport, address: str | None, now: datetime) -> Received:
        run = self._run
        name = body.report.name
        beat = self._beat(body, address, now)
        if beat is None:
            record, changed = await run(self._store_report, body, address, now)
        else:
            record, changed = beat, False
        refused = await self._busy_ports(name, body, now)
        rows = self._store.agents.live(name)
        if self._stale(name, body.tasks, rows) is None:
            assignments, freed = self._assignments(rows), False
        else:
            assignments, freed = await run(self._settle, name, body.tasks, now)
        return Received(record, assignments, changed or freed or refused)

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` on the writer thread, unless the oldest job queued there has waited
        longer than `max_delay` (`OverloadError`: nothing is queued)."""
        database = self._store.database
        behind = database.writer.delay()
        if self.max_delay and behind > self.max_delay:
            raise OverloadError("the database writer", behind)
        return await database.run(fn, *args)

    def _beat(self, body: AgentReport, address: str | None, now: datetime) -> MachineRecord | None:
        """A plain heartbeat (no updates, no logs, nothing new for placement), kept in memory
        without a write (any thread); None when the report must be stored (`_store_report`).
        Access labels the agent claims are dropped first (`MachineRecords.admit`)."""
        if body.updates or body.logs:
            return None
        return self.records.heartbeat(self.records.admit(body.report), address, now)

    def _store_report(
        self, body: AgentReport, address: str | None, now: datetime
    ) -> tuple[MachineRecord, bool]:
        """Store the report, its task updates and logs in one transaction (on the writer thread
        while it runs). Returns the machine's new record and whether capacity may have changed
        (a task ended, the machine is new or back, or what it reports about its hardware
        changed)."""
        report = self.records.admit(body.report)
        name = report.name
        old = self.records.get(name)
        acked = old.acked_seq if old else -1
        freed = False
        agents = self._store.agents
        faulted = faulted_gpus(report)
        with self._store.database.write() as conn:
            for update in sorted(body.updates, key=lambda u: u.seq):
                if update.seq <= acked:
                    continue  # already stored: the agent retried before it saw our ack
                freed |= _apply_update(conn, name, update, now, faulted)
                acked = update.seq
            for chunk in body.logs:
                agents.append_log(conn, name, chunk)
            record, old = self.records.write_report(conn, report, address, now, acked)
        self.records.remember(record)
        if freed and name in self.holding:
            self._refresh_machine(name)
        changed = old is None or old.report is None or old.fingerprint != record.fingerprint
        return record, freed or changed

    async def _busy_ports(self, machine: str, body: AgentReport, now: datetime) -> bool:
        """Take back each port the agent found busy for its own worker 0 not yet started, and
        remember it and every other port of the range the agent found in use as busy there
        (`ports_in_use`); the next pass gives a free one. True when one was taken back."""
        if not body.busy_ports:
            return False
        self.ports.found_in_use(machine, body.ports_in_use, now)
        database = self._store.database
        busy = [(item.task_uid, item.port) for item in body.busy_ports]
        given_back = await self._run(refuse_ports, database, machine, busy)
        for port in given_back:
            self.ports.found_busy(machine, port, now)
            log.info(
                "machine %s: rendezvous port %d is in use there; another is given", machine, port
            )
        return bool(given_back)

    def _stale(
        self, machine: str, running: Collection[str] | None, rows: list[Row]
    ) -> Stale | None:
        """What the machine's stored tasks must lose to agree with the tasks its agent says it
        runs (`running`, their task uids; None when the agent does not say), given its live
        task rows; None when nothing (nothing to write).

        A Lost task still held there is freed when its agent runs no such worker; a Starting or
        Running task the agent runs no worker for ends Lost (`NO_WORKER`) and is freed. A worker
        the agent still runs but the reply does not list is stopped by the agent, which then
        reports its end (and that frees it, `_apply_update`)."""
        if running is None:
            return None
        uids = set(running)
        lost = [
            row["id"]
            for row in rows
            if row["uid"] not in uids and ends_lost_without_worker(TaskState(row["state"]))
        ]
        released: list[int] = []
        if machine in self.holding:
            held = self._store.agents.held(machine)
            released = [row["id"] for row in held if row["uid"] not in uids]
        return Stale(lost, released) if lost or released else None

    def _settle(
        self, machine: str, running: Collection[str] | None, now: datetime
    ) -> tuple[list[Assignment], bool]:
        """The assignments once `_stale` is written (on the writer thread while it runs): read
        again there, so what is ended is what is stored at the time of the write. True when
        that freed GPUs."""
        agents = self._store.agents
        rows = agents.live(machine)
        found = self._stale(machine, running, rows)
        if found is None:
            return self._assignments(rows), False
        with self._store.database.write() as conn:
            for task_id in found.lost:
                run_seq = write_lost(conn, task_id, NO_WORKER.format(machine=machine), now)
                if run_seq is not None:
                    settle_run(conn, run_seq, now)
            for task_id in found.released:
                write_release(conn, task_id)
        self._refresh_machine(machine)
        return self._assignments(agents.live(machine)), True

    def mark_silent(self, silent: Iterable[tuple[str, str]], now: datetime) -> int:
        """Live tasks on each (machine, message) become Lost; returns the count (on the writer
        thread while it runs).

        Their GPUs, cores and memory stay held on that machine (`held`): a silent machine may be
        cut off, not dead, with its workers still running. They return once its agent reports
        the worker gone, or reports back without it (`_stale`)."""
        lost = 0
        with self._store.database.write() as conn:
            for machine, message in silent:
                for task_id, run_seq in live_tasks_on(conn, machine):
                    write_lost_held(conn, task_id, message, now)
                    settle_run(conn, run_seq, now)
                    lost += 1
        if lost:
            self.holding = self._store.agents.holding()
        return lost

    def forget(self, machine: str, now: datetime, by: str) -> ForgottenMachine | None:
        """An admin says `machine` will never return (`by`: who, for the log): in one
        transaction its live tasks end Lost with their GPUs given back at once, Lost tasks still
        holding GPUs there give them back, their runs settle, and its row, reservations and
        agent tokens go; then its record. None when no such machine (on the writer thread while
        it runs).

        Nothing else frees a silent machine's GPUs (`mark_silent` keeps them held): the admin's
        word is what says no worker of it runs any more."""
        if self.records.get(machine) is None:
            return None
        at = now.isoformat()
        with self._store.database.write() as conn:
            gpus = gpus_held_on(conn, machine)
            live = live_tasks_on(conn, machine)
            lost = task_names(conn, [task_id for task_id, _ in live])
            message = FORGOTTEN.format(machine=machine, at=at)
            for task_id, _ in live:
                settle_run(conn, write_lost_freed(conn, task_id, message, now), now)
            for task_id in held_on(conn, machine):
                write_release(conn, task_id, FORGOTTEN_NOTE.format(machine=machine, at=at))
            tokens = Tokens.revoke_agents_of(conn, machine)
            reservations = Machines.remove(conn, machine)
        self.records.forget(machine)
        self.holding.discard(machine)
        self.ports.forget(machine)
        log.warning(
            "machine %s forgotten by %s: %d task(s) Lost (%s), %d GPU(s) given back,"
            " %d reservation(s) removed, %d agent token(s) revoked",
            machine,
            by,
            len(lost),
            ", ".join(lost) or "none",
            gpus,
            reservations,
            tokens,
        )
        return ForgottenMachine(
            name=machine,
            forgotten_at=now,
            tasks_lost=lost,
            gpus_released=gpus,
            reservations_removed=reservations,
            agent_tokens_revoked=tokens,
        )

    def _refresh_machine(self, machine: str) -> None:
        if self._store.agents.holds(machine):
            self.holding.add(machine)
        else:
            self.holding.discard(machine)

    def _assignments(self, rows: list[Row]) -> list[Assignment]:
        """Every live task of the machine (its `live` rows), with `cancel` set for those to
        stop. Two queries whatever the number of tasks: the machine's tasks, then the workers
        of their runs (for the rendezvous); each run's spec is parsed once.

        A task is left out until it may start (`domain/rendezvous.py`)."""
        if not rows:
            return []
        specs = {row["run_seq"]: json.loads(row["spec"]) for row in rows}
        gangs = [seq for seq, spec in specs.items() if not _is_array(spec)]
        workers: dict[int, list[Worker]] = {seq: [] for seq in gangs}
        if gangs:
            for worker in self._store.agents.workers(gangs):
                workers[worker["run_seq"]].append(_worker(worker))
        found = []
        for row in rows:
            run_seq = row["run_seq"]
            gang = workers.get(run_seq)
            meet = rendezvous(run_seq, _worker(row), gang, self._address)
            if meet is not None:
                found.append(_assignment(row, specs[run_seq], meet))
        return found

    def _address(self, machine: str | None) -> str:
        record = self.records.get(machine or "")
        return (record.address if record else None) or machine or "127.0.0.1"


def settle_run(conn: Connection, seq: int, now: datetime) -> None:
    """Set a run's state from its tasks, and tell the rest of a gang to stop when one of it
    failed (the rules: `domain/lifecycle.py`), inside the caller's transaction. A run whose
    attempt failed by a fault, with attempts left, goes back to the queue instead of failing
    (`requeues`), once every worker of the attempt ended."""
    found = run_tasks(conn, seq)
    if found is None:
        return
    states = found.states
    if stops_the_rest(states, is_array=found.is_array):
        stop_live_tasks(conn, seq)
    new = run_state(states)
    if new is None:
        return
    failures = [task for task in found.tasks if failed(TaskState(task[1]))]
    failure = failures[0] if new == RunState.FAILED and failures else None
    if requeues_preempted(new, preempting=found.preempting):
        requeue(conn, seq, PREEMPTED, now, preempted=True)
        return
    if failure is not None and _requeues(found):
        requeue(conn, seq, failure_text(failure), now)
        return
    write_run_state(conn, seq, new, failure, now)


def _requeues(found: RunTasks) -> bool:
    limit = found.time_limit_seconds
    ends = [
        WorkerEnd(
            state=state,
            gpu_fault=fault is not None,
            timed_out=limit is not None and ran is not None and ran >= limit,
        )
        for state, fault, ran in zip(found.states, found.faults, found.ran_seconds, strict=True)
    ]
    return requeues(
        ends,
        attempt=found.attempt - found.preemptions,  # a preemption uses up no retry
        retries=found.retries,
        retry_on_failure=found.retry_on_failure,
    )


def faulted_gpus(report: MachineReport) -> dict[str, str]:
    """The machine's faulted GPUs by UUID, each with its fault in words: `GPU 3 (GPU-…)
    faulted: Xid 79: GPU has fallen off the bus`."""
    found = {}
    for gpu in report.gpus:
        if gpu.health.state is GpuHealthState.FAULTED:
            signals = "; ".join(signal.message for signal in gpu.health.signals)
            found[gpu.uuid] = f"GPU {gpu.index} ({gpu.uuid}) faulted" + (
                f": {signals}" if signals else ""
            )
    return found


def _apply_update(
    conn: Connection,
    machine: str,
    update: TaskUpdate,
    now: datetime,
    faulted: dict[str, str] | None = None,
) -> bool:
    """Write what the task state machine (`domain/lifecycle.py`) makes of the agent's update
    (`faulted`: the machine's faulted GPUs as its report says, `faulted_gpus`); returns whether
    GPUs were freed."""
    task = updated_task(conn, machine, update.task_uid)
    if task is None:
        return False
    step = move(TaskState(task.state), task.held, update.state)
    if step is Move.RELEASE:
        write_release(conn, task.id, late_end_note(update))
        return True
    if step is Move.END:
        write_end(conn, task.id, update, gpu_fault(update.state, task.gpu_ids, faulted or {}))
        settle_run(conn, task.run_seq, now)
        return True
    if step is Move.FORWARD:
        write_forward(conn, task.id, update)
    return False


def _worker(row: Row) -> Worker:
    return Worker(row["idx"], row["machine"], TaskState(row["state"]), row["port"])


def _is_array(spec: dict[str, Any]) -> bool:
    requested = spec["requested_resources"]
    return isinstance(requested, dict) and requested.get("array") is not None


def _assignment(row: Row, spec: dict[str, Any], meet: Rendezvous) -> Assignment:
    return Assignment(
        task_uid=row["uid"],
        task=row["name"],
        run=submitted_name(row["run_name"]),
        workspace=row["workspace"],
        index=row["idx"],
        command=spec["command"],
        image=spec.get("image"),
        env=spec.get("env", {}),
        assigned_gpu_ids=json.loads(row["gpu_ids"]),
        cpu_cores=row["cpu_cores"],
        memory_bytes=row["memory_bytes"],
        network=NetworkKind(row["network"] or NetworkKind.LOCAL.value),
        min_gbps=(spec["requested_resources"].get("network") or {}).get("min_gbps"),
        nvlink_domain=row["nvlink_domain"],
        rendezvous=meet,
        drives=[
            Mount(name=drive["name"], mount_path=drive["mount_path"])
            for drive in spec["requested_resources"].get("drives", [])
        ],
        time_limit_seconds=spec.get("time_limit_seconds"),
        restart_count=row["attempt"] - 1,
        cancel=bool(row["cancel"]),
        stop_grace_seconds=row["stop_grace"] if row["cancel"] else None,
    )
