"""Each task's working directory: outside the agent's state directory, owned by its worker.

    <work root>/            0711, the agent's: workers may pass through, not list it
    <work root>/<task>/     0700, the worker's user: its working directory, HOME and TMPDIR
    <work root>/<task>/tmp/

The state directory (specs with every task's variables, logs, exit records, the agent's own
files) stays 0700 and the agent's, so a worker that is not the agent's user reads none of it.
"""

import logging
import os
import shutil
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .users import WorkerUser, WorkerUserError, WorkerUsers, device_groups

log = logging.getLogger(__name__)

ROOT_MODE = 0o711
TASK_MODE = 0o700
UID_CURSOR = "worker-uids.json"
"""In the state directory: where the next dynamic uid is looked for."""


class WorkerPlaceError(OSError):
    """No user or directory for this worker; the text says why, for the task's message."""


@dataclass(frozen=True)
class Worker:
    """Where and as whom one worker runs."""

    workdir: Path
    user: WorkerUser | None
    """None: the agent's own user."""


def default_work_root(state_dir: Path) -> Path:
    """`<state dir>-work`: beside the state directory, never inside it."""
    return state_dir.with_name(state_dir.name + "-work")


class WorkRoot:
    """Creates, lists and removes the tasks' working directories."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        os.chmod(root, ROOT_MODE)  # whatever the umask, and whatever an older agent left

    def warn_if_closed(self) -> None:
        """Say so where a folder above the work root is closed to other users: a worker with
        a uid of its own starts in its directory but cannot reach it by name (`cd $HOME`)."""
        closed = [p for p in self.root.parents if not os.stat(p).st_mode & stat.S_IXOTH]
        if closed:
            log.warning(
                "work_root %s: %s is closed to other users, so workers running as users of "
                "their own cannot reach their working directories by name",
                self.root,
                closed[-1],
            )

    def path(self, key: str) -> Path:
        return self.root / key

    def prepare(self, key: str, users: WorkerUsers, devices: Iterable[str], cursor: Path) -> Worker:
        """The user for task `key` (its devices' groups added) and its fresh directory."""
        try:
            users.check()
            user = users.assign(self.owners(), cursor)
        except WorkerUserError as error:
            raise WorkerPlaceError(str(error)) from None
        if user is not None:
            user = user.with_groups(device_groups(devices))
        return Worker(self.create(key, user), user)

    def create(self, key: str, user: WorkerUser | None) -> Path:
        """A fresh, empty directory for task `key`, owned by `user` (None: the agent's own)."""
        path = self.path(key)
        shutil.rmtree(path, ignore_errors=True)  # a launch interrupted before the worker ran
        path.mkdir(mode=TASK_MODE)
        (path / "tmp").mkdir(mode=TASK_MODE)
        if user is not None:
            for folder in (path / "tmp", path):
                os.chown(folder, user.uid, user.gid)
        return path

    def owners(self) -> set[int]:
        """The uids that own a task's directory here: tasks this agent has not forgotten."""
        uids = set()
        for entry in os.scandir(self.root):
            if entry.is_dir(follow_symlinks=False):
                uids.add(entry.stat(follow_symlinks=False).st_uid)
        return uids

    def remove(self, key: str) -> None:
        """The directory and whatever the worker left in it (symbolic links are not followed)."""
        shutil.rmtree(self.path(key), ignore_errors=True)
