"""Workers are not the agent: real workers, each as its own uid, try what the attacker did."""

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import until_async
from runtime_rig import Coordinator, Harness, assignment, uid_of

from astraeus.agent.runtime.state import StateDir
from astraeus.agent.runtime.users import DEFAULT_UIDS, WorkerUsers, can_switch_users, worker_users
from astraeus.agent.runtime.workdir import WorkRoot
from astraeus.shared import TaskState

needs_setuid = pytest.mark.skipif(
    not can_switch_users(),
    reason="this test process cannot start others as another user (needs CAP_SETUID, "
    "CAP_SETGID and CAP_CHOWN, e.g. root)",
)
SH = "/bin/sh"


@dataclass
class Places:
    work: Path
    """The work root, in a folder every user may pass through."""
    shared: Path
    """A folder every user may write (sticky, as /tmp), for workers to leave notes in."""


@pytest.fixture
def places() -> Iterator[Places]:
    top = Path(tempfile.mkdtemp(prefix="astraeus-isolation-"))
    top.chmod(0o711)
    shared = top / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    try:
        yield Places(work=top / "work", shared=shared)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _isolated(harness: Harness, places: Places) -> None:
    harness.users = worker_users("dynamic")
    harness.work_root = places.work


def _ended(coordinator: Coordinator, task: str) -> bool:
    last = coordinator.last(task)
    return last is not None and last.state.ended


WHO_AM_I = 'id -u; id -g; id -G; pwd; echo "$HOME"; echo "$TMPDIR"; stat -c "%u %a" .'


@needs_setuid
async def test_each_worker_runs_as_its_own_unprivileged_user(
    harness: Harness, coordinator: Coordinator, places: Places
) -> None:
    """Two workers run as two different uids from the range, never root, with no other group,
    each in a 0700 directory of its own outside the state directory (its HOME, TMPDIR below)."""
    _isolated(harness, places)
    for task in ("a-0", "b-0"):
        coordinator.assignments[task] = assignment(task, [SH, "-c", WHO_AM_I])
    await harness.start()
    await until_async(
        "both ends", lambda: _ended(coordinator, "a-0") and _ended(coordinator, "b-0")
    )
    await until_async("both logs", lambda: coordinator.log("a-0") and coordinator.log("b-0"))
    seen = {task: coordinator.log(task).splitlines() for task in ("a-0", "b-0")}
    uids = {int(lines[0]) for lines in seen.values()}
    assert len(uids) == 2
    assert uids <= set(DEFAULT_UIDS)
    for task, (uid, gid, groups, cwd, home, tmp, owner) in seen.items():
        assert (gid, groups) == (uid, uid)
        assert cwd == home == str(places.work / uid_of(task))
        assert tmp == f"{cwd}/tmp"
        assert owner == f"{uid} 700"
        assert coordinator.states(task)[-1] is TaskState.SUCCEEDED


ALPHA = 'echo $$ > "$SHARED/alpha.pid"; while [ ! -e "$SHARED/go" ]; do sleep 0.05; done'
ATTACK = """
alpha=$(cat "$SHARED/alpha.pid")
ls .. && echo "BREACH: listed the work root"
grep -rh WANDB ../*/ 2>/dev/null && echo "BREACH: read another working directory"
grep -h WANDB "$STATE"/tasks/*/spec.json 2>/dev/null && echo "BREACH: read another task's spec"
cat "$STATE/tasks/alpha-0/output.log" 2>/dev/null && echo "BREACH: read another task's log"
cat "$TOKEN" 2>/dev/null && echo "BREACH: read the agent's token"
tr '\\0' '\\n' < "/proc/$alpha/environ" 2>/dev/null | grep WANDB && echo "BREACH: environ"
kill -0 "$alpha" 2>/dev/null && echo "BREACH: could signal alpha"
echo '{"exit_code": 0, "signal": null, "message": null}' 2>/dev/null \\
  > "$STATE/tasks/alpha-0/status.json" && echo "BREACH: forged alpha's status"
echo done
"""


@needs_setuid
async def test_a_worker_reads_kills_and_fakes_nothing_of_another(
    harness: Harness, coordinator: Coordinator, places: Places, tmp_path: Path
) -> None:
    """The issue's attack: beta's worker cannot list or read alpha's working directory, spec,
    log or environ, nor the agent's token; cannot signal alpha's worker; and cannot write
    alpha's status.json, so alpha stays Running until it really ends."""
    _isolated(harness, places)
    token = tmp_path / "agent-token"
    token.write_text("agent-secret-token\n")
    token.chmod(0o600)
    shared = {"SHARED": str(places.shared)}
    coordinator.assignments["alpha-0"] = assignment(
        "alpha-0", [SH, "-c", ALPHA], env={**shared, "WANDB_API_KEY": "ALPHA-SECRET"}
    )
    await harness.start()
    await until_async("alpha to run", lambda: (places.shared / "alpha.pid").exists())
    where = {"STATE": str(harness.state_dir), "TOKEN": str(token)}
    coordinator.assignments["beta-0"] = assignment(
        "beta-0", [SH, "-c", ATTACK], env={**shared, **where}
    )
    await until_async("beta to end", lambda: _ended(coordinator, "beta-0"))
    await until_async("beta's log", lambda: "done" in coordinator.log("beta-0"))
    log = coordinator.log("beta-0")
    assert [line for line in log.splitlines() if "BREACH" in line] == []
    assert "ALPHA-SECRET" not in log
    assert "agent-secret-token" not in log
    assert coordinator.states("alpha-0") == [TaskState.STARTING, TaskState.RUNNING]
    (places.shared / "go").touch()
    await until_async("alpha to end", lambda: _ended(coordinator, "alpha-0"))
    assert coordinator.states("alpha-0")[-1] is TaskState.SUCCEEDED


def test_state_and_work_folders_are_private_whatever_the_umask(tmp_path: Path) -> None:
    """Under a permissive umask, and over folders made open before, the state directory is
    0700 and the work root 0711."""
    (tmp_path / "state").mkdir(mode=0o755)
    old = os.umask(0)
    try:
        StateDir(tmp_path / "state")
        WorkRoot(tmp_path / "state-work")
    finally:
        os.umask(old)
    modes = [stat.S_IMODE((tmp_path / name).stat().st_mode) for name in ("state", "state-work")]
    assert modes == [0o700, 0o711]


def test_a_closed_folder_above_the_work_root_is_reported(
    tmp_path: Path, places: Places, caplog: pytest.LogCaptureFixture
) -> None:
    """The agent warns where workers of their own uid could not reach their folders by name."""
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    WorkRoot(places.work).warn_if_closed()
    assert caplog.messages == []
    WorkRoot(closed / "work").warn_if_closed()
    assert caplog.messages[-1].startswith(f"work_root {closed / 'work'}: ")
    assert caplog.messages[-1].endswith(
        " is closed to other users, so workers running as users of their own cannot reach "
        "their working directories by name"
    )


@needs_setuid
async def test_a_named_worker_user(
    harness: Harness, coordinator: Coordinator, places: Places
) -> None:
    """`worker_user = nobody` runs every worker as nobody, with nobody's groups only."""
    harness.users, harness.work_root = worker_users("nobody"), places.work
    coordinator.assignments["t-0"] = assignment("t-0", [SH, "-c", "id -un; id -G"])
    await harness.start()
    await until_async("t-0 to end", lambda: _ended(coordinator, "t-0"))
    await until_async("the log", lambda: coordinator.log("t-0"))
    name, groups = coordinator.log("t-0").splitlines()
    assert name == "nobody"
    assert groups == " ".join(str(g) for g in sorted({*os.getgrouplist("nobody", 65534)}))


async def test_a_root_agent_without_permission_starts_no_worker_as_root(
    harness: Harness, coordinator: Coordinator
) -> None:
    """A root agent that cannot switch users and was not allowed root workers fails the task
    with the reason instead of running it as root."""
    if os.geteuid() != 0:
        pytest.skip("this test process is not root")
    harness.users = WorkerUsers.agents_own()
    coordinator.assignments["t-0"] = assignment("t-0", [SH, "-c", "true"])
    await harness.start()
    await until_async("t-0 to end", lambda: _ended(coordinator, "t-0"))
    last = coordinator.last("t-0")
    assert last is not None
    assert (last.state, last.message) == (
        "Failed",
        "workers would run as root, this agent's own user: workers never run as root unless "
        "allow_root_workers = true (ASTRAEUS_ALLOW_ROOT_WORKERS=1)",
    )


async def test_a_worker_starts_from_a_clean_environment(
    harness: Harness, coordinator: Coordinator
) -> None:
    """The agent's environment holds what an operator gave it (a cloud key, a package index with
    a password, a proxy): a plain worker sees none of it but `PATH`, `LANG`, `LC_*` and what the
    operator passes through, besides its run's `env` and the placement's variables."""
    harness.agent_env = {
        **harness.agent_env,
        "LC_TIME": "C",
        "AWS_SECRET_ACCESS_KEY": "agent-cloud-key",
        "PIP_INDEX_URL": "https://ops:hunter2@pypi.internal/simple",
        "HTTPS_PROXY": "http://proxy.internal:3128",
        "USER": "root",
    }
    harness.env_passthrough = ("HTTPS_PROXY",)
    coordinator.assignments["a-0"] = assignment("a-0", ["/usr/bin/env"], env={"MINE": "1"})
    await harness.start()
    await until_async("the worker to end", lambda: _ended(coordinator, "a-0"))
    await until_async("its log", lambda: "MINE=1" in coordinator.log("a-0"))
    seen = dict(line.split("=", 1) for line in coordinator.log("a-0").splitlines() if "=" in line)
    assert "agent-cloud-key" not in coordinator.log("a-0")
    assert "hunter2" not in coordinator.log("a-0")
    assert {"AWS_SECRET_ACCESS_KEY", "PIP_INDEX_URL", "USER"}.isdisjoint(seen)
    assert {"ASTRAEUS_TOKEN_FILE", "NOTIFY_SOCKET", "WATCHDOG_USEC"}.isdisjoint(seen)
    assert seen["ASTRAEUS_TASK"] == "a-0"  # the worker's own variables are there
    assert seen["HTTPS_PROXY"] == "http://proxy.internal:3128"
    assert (seen["PATH"], seen["LANG"], seen["LC_TIME"]) == ("/usr/bin:/bin", "C.UTF-8", "C")
    assert seen["MINE"] == "1"
    assert seen["HOME"] != harness.agent_env.get("HOME")
