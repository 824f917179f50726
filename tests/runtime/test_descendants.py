"""Every process a worker starts ends with its task, and the agent leaves no zombie behind."""

import os
import signal
import subprocess
from pathlib import Path

import pytest
from helpers import until_async
from runtime_rig import Coordinator, Harness, assignment, python, uid_of

from astraeus.agent.runtime.launch import proc_alive, proc_start_time
from astraeus.agent.runtime.shim import descendants

ESCAPE = """
import os, pathlib, signal, subprocess, sys, time
out = pathlib.Path(sys.argv[1])
quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
# nohup: ignores SIGHUP, stays in the worker's session
nohup = subprocess.Popen(["nohup", "sleep", "300"], **quiet)
# setsid: a session and process group of its own, ignoring SIGTERM too
setsid = subprocess.Popen(
    [sys.executable, "-S", "-c",
     "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"],
    start_new_session=True, **quiet)
# a double fork: its parent is gone at once, so it is nobody's child
if os.fork() == 0:
    if os.fork() == 0:
        os.setsid()
        (out / "orphan").write_text(str(os.getpid()))
        os.execvp("sleep", ["sleep", "300"])
    os._exit(0)
(out / "nohup").write_text(str(nohup.pid))
(out / "setsid").write_text(str(setsid.pid))
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
while not (out / "go").exists():  # the test says when to exit, once it saw every escapee
    time.sleep(0.01)
"""
NAMES = ("nohup", "setsid", "orphan")


def _ended(coordinator: Coordinator, task: str) -> bool:
    last = coordinator.last(task)
    return last is not None and last.state.ended


def _written(path: Path) -> bool:
    return path.exists() and path.read_text().strip().isdigit()


def _started(out: Path) -> dict[int, int | None]:
    pids = [int((out / name).read_text()) for name in NAMES]
    return {pid: proc_start_time(pid) for pid in pids}


@pytest.mark.parametrize(
    ("extra", "state"),
    [
        pytest.param({}, "Succeeded", id="worker-exits"),
        pytest.param({"cancel": True}, "Cancelled", id="cancelled"),
        pytest.param({"time_limit_seconds": 60}, "Failed", id="time-limit"),
    ],
)
async def test_no_process_of_a_worker_outlives_its_task(
    harness: Harness, coordinator: Coordinator, tmp_path: Path, extra: dict, state: str
) -> None:
    """A `nohup` child, a `setsid` child that ignores SIGTERM and a double-forked orphan are all
    gone by the time the task's end is reported, however it ends."""
    task = assignment("t-0", python(ESCAPE, str(tmp_path)), **extra)
    coordinator.assignments["t-0"] = task.model_copy(update={"cancel": False})
    agent = await harness.start()
    # A file exists before its pid is written into it: wait for the pid itself.
    await until_async("the escapees to start", lambda: all(_written(tmp_path / n) for n in NAMES))
    started = _started(tmp_path)
    assert all(proc_alive(pid, start) for pid, start in started.items())
    record = agent.runner.records[uid_of("t-0")]
    if task.cancel:
        coordinator.assignments["t-0"] = task
    elif task.time_limit_seconds and record.started_at is not None:
        record.started_at -= 2 * task.time_limit_seconds  # as if two minutes had gone by
    else:
        (tmp_path / "go").touch()
    await until_async("t-0 to end", lambda: _ended(coordinator, "t-0"))
    assert [pid for pid, start in started.items() if proc_alive(pid, start)] == []
    last = coordinator.last("t-0")
    assert last is not None
    assert last.state == state


def _zombie_children() -> list[int]:
    zombies = []
    for pid in descendants(os.getpid()):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if stat[stat.rindex(")") + 2] == "Z":
            zombies.append(pid)
    return zombies


async def test_the_agent_reaps_every_shim(harness: Harness, coordinator: Coordinator) -> None:
    """After its workers end, the agent holds no `<defunct>` shim (the demo once held 24).
    Only processes this test started count: an earlier test in the same pytest process may
    have left a child of its own unreaped, which is not the agent's."""
    before = set(descendants(os.getpid()))
    for i in range(4):
        coordinator.assignments[f"t-{i}"] = assignment(f"t-{i}", python("pass"))
    await harness.start()
    await until_async("the four ends", lambda: all(_ended(coordinator, f"t-{i}") for i in range(4)))
    await until_async("no zombie shim", lambda: not set(_zombie_children()) - before)


def test_descendants_follow_the_parent_chain() -> None:
    """A grandchild is found through its parent; the process itself is not in the list."""
    child = subprocess.Popen(
        ["/bin/sh", "-c", "sleep 30 & echo $!; wait"], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    grandchild = int(child.stdout.readline())
    try:
        assert {child.pid, grandchild} <= set(descendants(os.getpid()))
        assert os.getpid() not in descendants(os.getpid())
    finally:
        os.kill(grandchild, signal.SIGKILL)
        child.wait()
        child.stdout.close()
