"""The state directory: what the agent started, and the updates not yet acknowledged.

Layout (every JSON file replaced atomically):
    outbox.json                  next seq and the unacknowledged task updates
    tasks/<task>/record.json     the assignment, how it was launched, the last state seen
    tasks/<task>/spec.json       what the shim runs (command, environment, files)
    tasks/<task>/started.json    written by the shim once the worker runs
    tasks/<task>/status.json     written by the shim when the worker ends
    tasks/<task>/output.log      the worker's stdout and stderr
"""

import json
import os
import re
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from astraeus.shared import Assignment, TaskState, TaskUpdate

UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def worker_name(assignment: Assignment) -> str:
    """`astraeus-<workspace>-<task>`: the worker's unit or container name, safe for both."""
    return f"astraeus-{UNSAFE.sub('_', assignment.workspace)}-{UNSAFE.sub('_', assignment.task)}"


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
    term_sent_at: float | None = None
    kill_sent: bool = False
    log_shipped: int = 0
    ended_at: float | None = None

    @property
    def task(self) -> str:
        return self.assignment.task


class StateDir:
    """Reads and writes the state directory; the only code that knows its layout."""

    def __init__(self, root: Path) -> None:
        self.root = root
        # Specs hold the workers' environments, which may carry the users' secrets.
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(root, 0o700)  # also one made before, by hand or by an older agent
        (root / "tasks").mkdir(mode=0o700, exist_ok=True)

    def task_dir(self, task: str) -> Path:
        return self.root / "tasks" / UNSAFE.sub("_", task)

    def path(self, task: str, name: str) -> Path:
        return self.task_dir(task) / name

    def save(self, record: TaskRecord) -> None:
        self.task_dir(record.task).mkdir(parents=True, exist_ok=True)
        write_json(self.path(record.task, "record.json"), record.model_dump(mode="json"))

    def records(self) -> list[TaskRecord]:
        found = []
        for path in sorted((self.root / "tasks").glob("*/record.json")):
            data = read_json(path)
            if data is not None:
                found.append(TaskRecord.model_validate(data))
        return found

    def remove(self, task: str) -> None:
        """The task's folder, with whatever its worker left in it (its working directory)."""
        shutil.rmtree(self.task_dir(task), ignore_errors=True)


class Outbox:
    """Task updates numbered per agent and kept on disk until the coordinator acknowledges them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        data = read_json(path) or {}
        self.next_seq: int = data.get("next_seq", 0)
        self.pending = [TaskUpdate.model_validate(u) for u in data.get("pending", [])]

    def add(self, task: str, state: TaskState, at: datetime, **detail: Any) -> TaskUpdate:
        update = TaskUpdate(seq=self.next_seq, task=task, state=state, at=at, **detail)
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
