"""What agents send (reports, task updates, logs) and what they get back (assignments)."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Collection
from datetime import datetime
from typing import Any

from astraeus.coordinator.domain.lifecycle import (
    NO_WORKER,
    Move,
    ends_lost_without_worker,
    late_end_note,
    move,
)
from astraeus.coordinator.domain.rendezvous import Worker, rendezvous
from astraeus.shared import (
    AgentReport,
    Assignment,
    LogChunk,
    Mount,
    NetworkKind,
    Rendezvous,
    TaskState,
    TaskUpdate,
)

from .db import Database, Row
from .machines import MachineRecord, Machines
from .runs import settle_run

log = logging.getLogger(__name__)


class Agents:
    def __init__(self, database: Database, machines: Machines, log_cap_bytes: int) -> None:
        self._database = database
        self._machines = machines
        self._log_cap = log_cap_bytes
        self.holding: set[str] = set()
        """Machines with Lost tasks whose GPUs are still held (see `reply`)."""
        self.refresh_holding()

    def refresh_holding(self) -> None:
        """Read which machines hold GPUs for Lost tasks (after a pass marked tasks Lost)."""
        rows = self._database.read("SELECT DISTINCT machine FROM tasks WHERE held = 1")
        self.holding = {row["machine"] for row in rows}

    def apply(
        self, body: AgentReport, address: str | None, now: datetime
    ) -> tuple[MachineRecord, bool]:
        """Store the report, its task updates and logs in one transaction.

        Returns the machine's new record and whether capacity may have changed (a task ended,
        the machine is new or back, or what it reports about its hardware changed). A plain
        heartbeat (no updates, no logs, nothing new for placement) writes nothing now.
        Access labels the agent claims are dropped first (`Machines.admit`)."""
        beat = self.beat(body, address, now)
        if beat is not None:
            return beat, False
        return self.store_report(body, address, now)

    def beat(self, body: AgentReport, address: str | None, now: datetime) -> MachineRecord | None:
        """A plain heartbeat (no updates, no logs, nothing new for placement), kept in memory
        without a write (any thread); None when the report must be stored (`store_report`)."""
        if body.updates or body.logs:
            return None
        return self._machines.heartbeat(self._machines.admit(body.report), address, now)

    def store_report(
        self, body: AgentReport, address: str | None, now: datetime
    ) -> tuple[MachineRecord, bool]:
        """`apply` for a report that writes (on the writer thread while it runs)."""
        report = self._machines.admit(body.report)
        name = report.name
        old = self._machines.get(name)
        acked = old.acked_seq if old else -1
        freed = False
        with self._database.write() as conn:
            for update in sorted(body.updates, key=lambda u: u.seq):
                if update.seq <= acked:
                    continue  # already stored: the agent retried before it saw our ack
                freed |= _apply_update(conn, name, update, now)
                acked = update.seq
            for chunk in body.logs:
                self._append_log(conn, name, chunk)
            record, old = self._machines.write_report(
                conn, report, report.model_dump_json(), address, now, acked
            )
        self._machines.remember(record)
        if freed and name in self.holding:
            self._refresh_machine(name)
        changed = old is None or old.report is None or old.fingerprint != record.fingerprint
        return record, freed or changed

    def _append_log(self, conn: sqlite3.Connection, machine: str, chunk: LogChunk) -> None:
        """Apply a chunk by its offsets: what is held already changes nothing (a resend), a
        chunk starting earlier replaces what was held from there on, so the log never
        duplicates or goes out of order."""
        task_id = _task_id(conn, machine, chunk.task_uid)
        if task_id is None:
            return
        held = conn.execute(
            "SELECT coalesce(max(end_offset), 0) FROM logs WHERE task_id = ?", (task_id,)
        ).fetchone()[0]
        if chunk.end <= held:
            return
        cut = conn.execute(
            "SELECT 1 FROM logs WHERE task_id = ? AND offset < ? AND end_offset > ? LIMIT 1",
            (task_id, chunk.offset, chunk.offset),
        ).fetchone()
        if cut is not None:
            # Only an agent that cuts its log differently from before does this; keeping the
            # text held is better than a line twice.
            log.warning(
                "machine %s: log chunk at byte %d of task %s starts inside one already held;"
                " ignored",
                machine,
                chunk.offset,
                chunk.task_uid,
            )
            return
        conn.execute("DELETE FROM logs WHERE task_id = ? AND offset >= ?", (task_id, chunk.offset))
        conn.execute(
            "INSERT INTO logs (task_id, offset, end_offset, data) VALUES (?, ?, ?, ?)",
            (task_id, chunk.offset, chunk.end, chunk.data),
        )
        self._trim_log(conn, task_id)

    def _trim_log(self, conn: sqlite3.Connection, task_id: int) -> None:
        """Drop the oldest chunks past the cap."""
        total = 0
        rows = conn.execute(
            "SELECT id, length(data) FROM logs WHERE task_id = ? ORDER BY offset DESC, id DESC",
            (task_id,),
        ).fetchall()
        for row_id, size in rows:
            total += size
            if total > self._log_cap:
                conn.execute("DELETE FROM logs WHERE task_id = ? AND id <= ?", (task_id, row_id))
                break

    def assignments(self, machine: str) -> list[Assignment]:
        """Every live task on the machine, with `cancel` set for those to stop."""
        return self.assignments_of(self.live(machine))

    def reply(
        self, machine: str, running: Collection[str] | None, now: datetime
    ) -> tuple[list[Assignment], bool]:
        """The machine's assignments, once what is stored for it agrees with the tasks its agent
        says it runs (`running`, their task uids; None when the agent does not say). True when
        that freed GPUs.

        A Lost task still held there is freed when its agent runs no such worker; a Starting or
        Running task the agent runs no worker for ends Lost (`NO_WORKER`) and is freed. A worker
        the agent still runs but the reply does not list is stopped by the agent, which then
        reports its end (and that frees it, `_apply_update`)."""
        rows = self.live(machine)
        if self.stale(machine, running, rows) is None:
            return self.assignments_of(rows), False
        return self.settle(machine, running, now)

    def stale(
        self, machine: str, running: Collection[str] | None, rows: list[Row]
    ) -> tuple[list[int], list[int]] | None:
        """The machine's tasks that `reply` must end Lost and those whose held GPUs it must
        release, given its live task rows; None when there are none (nothing to write)."""
        if running is None:
            return None
        uids = set(running)
        gone = [
            row["id"]
            for row in rows
            if row["uid"] not in uids and ends_lost_without_worker(TaskState(row["state"]))
        ]
        released: list[int] = []
        if machine in self.holding:
            held = self._database.read(
                "SELECT id, uid FROM tasks WHERE machine = ? AND held = 1", (machine,)
            )
            released = [row["id"] for row in held if row["uid"] not in uids]
        return (gone, released) if gone or released else None

    def settle(
        self, machine: str, running: Collection[str] | None, now: datetime
    ) -> tuple[list[Assignment], bool]:
        """`reply` when something must be written (on the writer thread while it runs): read
        again there, so what is ended is what is stored at the time of the write."""
        found = self.stale(machine, running, self.live(machine))
        if found is None:
            return self.assignments(machine), False
        gone, released = found
        with self._database.write() as conn:
            for task_id in gone:
                _end_lost(conn, task_id, NO_WORKER.format(machine=machine), now)
            for task_id in released:
                _release(conn, task_id)
        self._refresh_machine(machine)
        return self.assignments_of(self.live(machine)), True

    def _refresh_machine(self, machine: str) -> None:
        held = self._database.read_one(
            "SELECT 1 AS one FROM tasks WHERE machine = ? AND held = 1 LIMIT 1", (machine,)
        )
        if held is None:
            self.holding.discard(machine)
        else:
            self.holding.add(machine)

    def live(self, machine: str) -> list[Row]:
        return self._database.read(
            "SELECT tasks.id, tasks.state, tasks.run_seq, tasks.idx, tasks.name, tasks.uid,"
            " tasks.machine, tasks.port,"
            " tasks.gpu_ids, tasks.cpu_cores, tasks.memory_bytes, tasks.cancel,"
            " runs.name AS run_name, runs.workspace, runs.spec, runs.network,"
            " runs.nvlink_domain FROM tasks JOIN runs ON runs.seq = tasks.run_seq"
            " WHERE tasks.machine = ? AND tasks.state IN ('Assigned', 'Starting',"
            " 'Running') ORDER BY tasks.id",
            (machine,),
        )

    def assignments_of(self, rows: list[Row]) -> list[Assignment]:
        """Two queries whatever the number of tasks: the machine's tasks (`live`), then the
        workers of their runs (for the rendezvous); each run's spec is parsed once.

        A task is left out until it may start (`domain/rendezvous.py`)."""
        if not rows:
            return []
        specs = {row["run_seq"]: json.loads(row["spec"]) for row in rows}
        gangs = [seq for seq, spec in specs.items() if not _is_array(spec)]
        workers: dict[int, list[Worker]] = {seq: [] for seq in gangs}
        if gangs:
            marks = ",".join("?" * len(gangs))
            for worker in self._database.read(
                f"SELECT run_seq, idx, machine, state, port FROM tasks"  # noqa: S608
                f" WHERE run_seq IN ({marks}) ORDER BY run_seq, idx",
                tuple(gangs),
            ):
                workers[worker["run_seq"]].append(_worker(worker))
        found = []
        for row in rows:
            run_seq = row["run_seq"]
            gang = workers.get(run_seq)
            meet = rendezvous(run_seq, _worker(row), gang, self._address)
            if meet is not None:
                found.append(self._assignment(row, specs[run_seq], meet))
        return found

    def _assignment(self, row: Row, spec: dict[str, Any], meet: Rendezvous) -> Assignment:
        return Assignment(
            task_uid=row["uid"],
            task=row["name"],
            run=row["run_name"],
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
            cancel=bool(row["cancel"]),
        )

    def _address(self, machine: str | None) -> str:
        record = self._machines.get(machine or "")
        return (record.address if record else None) or machine or "127.0.0.1"


def _worker(row: Row) -> Worker:
    return Worker(row["idx"], row["machine"], TaskState(row["state"]), row["port"])


def _is_array(spec: dict[str, Any]) -> bool:
    requested = spec["requested_resources"]
    return isinstance(requested, dict) and requested.get("array") is not None


def _task_id(conn: sqlite3.Connection, machine: str, uid: str) -> int | None:
    """The task with this uid, if it is on this machine: an agent speaks for its own only."""
    row = conn.execute(
        "SELECT id FROM tasks WHERE uid = ? AND machine = ?", (uid, machine)
    ).fetchone()
    return int(row[0]) if row else None


def _apply_update(
    conn: sqlite3.Connection, machine: str, update: TaskUpdate, now: datetime
) -> bool:
    """Write what the task state machine (`domain/lifecycle.py`) makes of the agent's update;
    returns whether GPUs were freed."""
    row = conn.execute(
        "SELECT id, run_seq, state, held FROM tasks WHERE uid = ? AND machine = ?",
        (update.task_uid, machine),
    ).fetchone()
    if row is None:
        return False
    task_id, run_seq = int(row[0]), int(row[1])
    step = move(TaskState(row[2]), bool(row[3]), update.state)
    if step is Move.RELEASE:
        _release(conn, task_id, late_end_note(update))
        return True
    at = update.at.isoformat()
    if step is Move.END:
        conn.execute(
            "UPDATE tasks SET state = ?, exit_code = ?, message = ?, ended_at = ?,"
            " started_at = coalesce(started_at, ?) WHERE id = ?",
            (update.state.value, update.exit_code, update.message, at, at, task_id),
        )
        conn.execute("DELETE FROM gpu_holds WHERE task_id = ?", (task_id,))
        settle_run(conn, run_seq, now)
        return True
    if step is Move.FORWARD:
        conn.execute(
            "UPDATE tasks SET state = ?, message = coalesce(?, message),"
            " started_at = coalesce(started_at, ?) WHERE id = ?",
            (update.state.value, update.message, at, task_id),
        )
    return False


def _end_lost(conn: sqlite3.Connection, task_id: int, message: str, now: datetime) -> None:
    """A started task whose agent runs no worker for it: Lost, and its GPUs return."""
    row = conn.execute(
        "UPDATE tasks SET state = 'Lost', message = ?, ended_at = ? WHERE id = ?"
        " AND state IN ('Starting', 'Running') RETURNING run_seq",
        (message, now.isoformat(), task_id),
    ).fetchone()
    if row is not None:
        conn.execute("DELETE FROM gpu_holds WHERE task_id = ?", (task_id,))
        settle_run(conn, int(row[0]), now)


def _release(conn: sqlite3.Connection, task_id: int, note: str = "") -> None:
    """A Lost task's worker is gone from its machine: its GPUs, cores and memory return."""
    conn.execute(
        "UPDATE tasks SET held = 0, message = coalesce(message, '') || ? WHERE id = ?",
        (note, task_id),
    )
    conn.execute("DELETE FROM gpu_holds WHERE task_id = ?", (task_id,))
