"""The state directory: what the agent started, and the updates not yet acknowledged.

Layout (every JSON file replaced atomically):
    outbox.json                  next seq and the unacknowledged task updates
    tasks/<uid>/record.json      the assignment, how it was launched, the last state seen
    tasks/<uid>/spec.json        what the shim runs (command, environment, files)
    tasks/<uid>/started.json     written by the shim once the worker runs
    tasks/<uid>/status.json      written by the shim when the worker ends
    tasks/<uid>/output.log       the worker's stdout and stderr

`<uid>` is the assignment's `task_uid`: task names repeat across workspaces, so they key nothing.
A folder written before task uids (`tasks/<task name>/`, an agent upgraded with tasks running)
is read with a stand-in uid and adopted by the coordinator's assignment of the same workspace
and name (see `Runner.sync`); until then nothing about it is reported.
"""

import json
import logging
import os
import re
import shutil
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from astraeus.shared import Assignment, TaskState, TaskUpdate

log = logging.getLogger(__name__)

UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
STAND_IN = uuid.UUID("6f0c1a52-2b1e-4d59-9a43-3c1d2f0e7b10")
"""Namespace of the stand-in uids of tasks found from before task uids (`uuid5` of the folder)."""


def worker_name(assignment: Assignment) -> str:
    """`astraeus-<workspace>-<task>-<task uid>`: the worker's unit or container name, safe for
    both and unique (names alone collide: workspace `a-b`'s `c-0` and workspace `a`'s `b-c-0`)."""
    workspace, task = UNSAFE.sub("_", assignment.workspace), UNSAFE.sub("_", assignment.task)
    return f"astraeus-{workspace}-{task}-{assignment.task_uid}"


class TaskRecord(BaseModel):
    """What the agent knows about one task it was assigned."""

    assignment: Assignment
    state: TaskState = TaskState.ASSIGNED
    launcher: str | None = None
    unit: str | None = None
    pid: int | None = None
    pid_start: int | None = Field(default=None, description="/proc starttime, against pid reuse")
    started_at: float | None = None
    stop_reason: str | None = Field(default=None, description="why the agent stopped it")
    stop_fails: bool = Field(
        default=False,
        description="the stop ends the task Failed (its time limit ran out), not Cancelled",
    )
    term_sent_at: float | None = None
    stop_grace_seconds: float | None = Field(
        default=None,
        description="the grace period the coordinator chose for this stop; None: the agent's",
    )
    kill_sent: bool = False
    log_shipped: int = 0
    ended_at: float | None = None
    folder: str | None = Field(
        default=None, description="its folder under tasks/ when not its uid (from before uids)"
    )
    stand_in: bool = Field(
        default=False, description="found from before task uids: its uid is not the real one yet"
    )
    replay: dict[str, Any] | None = Field(
        default=None, description="a stand-in's latest update, sent once it has its real uid"
    )

    @property
    def task(self) -> str:
        """The name, for people: `<run>-<index>`."""
        return self.assignment.task

    @property
    def uid(self) -> str:
        return self.assignment.task_uid


class StateDir:
    """Reads and writes the state directory; the only code that knows its layout."""

    def __init__(self, root: Path) -> None:
        self.root = root
        # Specs hold the workers' environments, which may carry the users' secrets.
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(root, 0o700)  # also one made before, by hand or by an older agent
        (root / "tasks").mkdir(mode=0o700, exist_ok=True)

    def task_dir(self, record: TaskRecord) -> Path:
        return self.root / "tasks" / (record.folder or record.uid)

    def path(self, record: TaskRecord, name: str) -> Path:
        return self.task_dir(record) / name

    def save(self, record: TaskRecord) -> None:
        self.task_dir(record).mkdir(parents=True, exist_ok=True)
        write_json(self.path(record, "record.json"), record.model_dump(mode="json"))

    def records(self) -> list[TaskRecord]:
        """Every task found; one whose record cannot be read is logged and left alone."""
        found = []
        for path in sorted((self.root / "tasks").glob("*/record.json")):
            data = read_json(path)
            if data is None:
                continue
            try:
                found.append(TaskRecord.model_validate(_from_before_uids(data, path.parent.name)))
            except (ValidationError, TypeError, AttributeError) as error:
                log.warning("task folder %s is unreadable, left alone: %s", path.parent, error)
        return found

    def remove(self, record: TaskRecord) -> None:
        """The task's folder, with whatever its worker left in it (its working directory)."""
        shutil.rmtree(self.task_dir(record), ignore_errors=True)


def _from_before_uids(data: dict[str, Any], folder: str) -> dict[str, Any]:
    """A record written before task uids, given a stand-in uid and its folder; others as is."""
    assignment = data.get("assignment")
    if not isinstance(assignment, dict) or "task_uid" in assignment:
        return data
    stand_in = str(uuid.uuid5(STAND_IN, folder))
    return {
        **data,
        "assignment": {**assignment, "task_uid": stand_in},
        "folder": folder,
        "stand_in": True,
    }


class Outbox:
    """Task updates numbered per agent and kept on disk until the coordinator acknowledges them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        data = read_json(path) or {}
        self.next_seq: int = data.get("next_seq", 0)
        pending = data.get("pending", [])
        self.pending = [TaskUpdate.model_validate(u) for u in pending if "task_uid" in u]
        self.from_before_uids: list[dict[str, Any]] = [u for u in pending if "task_uid" not in u]
        """Updates written before task uids, by task name: `Runner` hands each to its task."""

    def add(self, task_uid: str, state: TaskState, at: datetime, **detail: Any) -> TaskUpdate:
        update = TaskUpdate(seq=self.next_seq, task_uid=task_uid, state=state, at=at, **detail)
        self.next_seq += 1
        self.pending.append(update)
        self._save()
        return update

    def ack(self, acked_seq: int) -> None:
        """Drop the updates the coordinator acknowledged.

        An `acked_seq` at or past `next_seq` was never ours to acknowledge: this agent's
        numbering restarted (its state directory was wiped) while the coordinator remembers
        the old one, and ignored our updates as already seen. They are renumbered from
        `acked_seq + 1`, in order, and sent again, so none is lost."""
        if acked_seq >= self.next_seq:
            self._renumber(acked_seq + 1)
            return
        before = len(self.pending)
        self.pending = [u for u in self.pending if u.seq > acked_seq]
        if len(self.pending) != before:
            self._save()

    def _renumber(self, start: int) -> None:
        self.pending = [
            u.model_copy(update={"seq": seq}) for seq, u in enumerate(self.pending, start=start)
        ]
        self.next_seq = start + len(self.pending)
        self._save()

    def forget_from_before_uids(self) -> None:
        """Their tasks have them now (`TaskRecord.replay`)."""
        if self.from_before_uids:
            self.from_before_uids = []
            self._save()

    def _save(self) -> None:
        pending = [u.model_dump(mode="json") for u in self.pending]
        write_json(self.path, {"next_seq": self.next_seq, "pending": pending})


def write_json(path: Path, data: Any) -> None:
    """Replace `path` atomically, so a crash leaves the old or the new file, never half of one."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as out:
        json.dump(data, out)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    """The file's JSON, or None when it does not exist (yet)."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
