"""Real workers started by the real runner, for assignments from a coordinator on loopback."""

import asyncio
import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import until_async
from runtime_rig import Coordinator, Harness, assignment, machine_report, python, uid_of, uuid

from astraeus.shared import MachineReport, TaskState

REPORT_SELF = (
    "import json, os, resource, sys\n"
    "print('hello from', os.environ['ASTRAEUS_TASK'], flush=True)\n"
    "json.dump({'env': dict(os.environ), 'argv': sys.argv[1:],\n"
    "           'memlock': resource.getrlimit(resource.RLIMIT_MEMLOCK)}, open(sys.argv[1], 'w'))\n"
)


def _memlock_allowed() -> int:
    """Unlimited where a process here may raise it so (CAP_SYS_RESOURCE), else the hard limit."""
    probe = "import resource as r; r.setrlimit(r.RLIMIT_MEMLOCK, (r.RLIM_INFINITY,) * 2)"
    if subprocess.run([sys.executable, "-c", probe], check=False).returncode == 0:
        return resource.RLIM_INFINITY
    return resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]


def _ended(coordinator: Coordinator, task: str) -> bool:
    last = coordinator.last(task)
    return last is not None and last.state.ended


@pytest.mark.parametrize(
    ("network", "expected"),
    [
        pytest.param("infiniband", {"NCCL_IB_HCA": "=mlx5_0:1"}, id="infiniband"),
        pytest.param("ethernet", {"NCCL_IB_DISABLE": "1"}, id="ethernet"),
    ],
)
async def test_worker_sees_its_environment(
    harness: Harness, coordinator: Coordinator, tmp_path: Path, network: str, expected: dict
) -> None:
    """The worker gets its GPUs, NCCL and rendezvous variables, unlimited memlock, and no more."""
    out = tmp_path / "seen.json"
    coordinator.assignments["train-0"] = assignment(
        "train-0",
        python(REPORT_SELF, str(out), "--epochs", "3"),
        assigned_gpu_ids=[uuid(1)],
        network=network,
        min_gbps=400,
        env={"USER_SETTING": "on"},
    )
    await harness.start()
    await until_async("train-0 to end", lambda: _ended(coordinator, "train-0"))
    seen = json.loads(out.read_text())
    env = seen["env"]
    assert {k: env.get(k) for k in expected} == expected
    assert {k: env[k] for k in ("CUDA_VISIBLE_DEVICES", "ASTRAEUS_GPU_COUNT")} == {
        "CUDA_VISIBLE_DEVICES": uuid(1),
        "ASTRAEUS_GPU_COUNT": "1",
    }
    assert env["ASTRAEUS_ASSIGNED_GPU_IDS"] == uuid(1)
    rendezvous = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "NODE_RANK")
    assert [env[k] for k in (*rendezvous, "LOCAL_WORLD_SIZE")] == [
        "127.0.0.1", "29500", "2", "0", "0", "1"
    ]  # fmt: skip
    assert env["USER_SETTING"] == "on"
    leaked = {"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "ASTRAEUS_TOKEN_FILE"} & set(env)
    assert leaked == set()
    assert seen["argv"] == [str(out), "--epochs", "3"]
    assert seen["memlock"] == [_memlock_allowed()] * 2
    assert coordinator.states("train-0") == [
        TaskState.STARTING,
        TaskState.RUNNING,
        TaskState.SUCCEEDED,
    ]
    await until_async("the log", lambda: "hello" in coordinator.log("train-0"))
    # A GPU worker started as a plain process is told first what it lacks (docs/runtime.md).
    note, *output = coordinator.log("train-0").splitlines()
    assert note.startswith("astraeus: this worker runs as a plain process: no private /dev/shm")
    assert output == ["hello from train-0"]


@pytest.mark.parametrize(
    ("command", "state", "exit_code", "sig", "message"),
    [
        pytest.param(python("raise SystemExit(0)"), "Succeeded", 0, None, None, id="zero"),
        pytest.param(
            python("raise SystemExit(3)"), "Failed", 3, None, "exited with code 3", id="three"
        ),
        pytest.param(
            python("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"),
            "Failed",
            None,
            11,
            "killed by signal SIGSEGV",
            id="signal",
        ),
        pytest.param(
            ["/nonexistent/train"],
            "Failed",
            127,
            None,
            "cannot start /nonexistent/train: No such file or directory",
            id="no-such-command",
        ),
    ],
)
async def test_exit_statuses(
    harness: Harness,
    coordinator: Coordinator,
    command: list[str],
    state: str,
    exit_code: int | None,
    sig: int | None,
    message: str | None,
) -> None:
    """How a worker ends becomes the task's state, exit code, signal and message."""
    coordinator.assignments["t-0"] = assignment("t-0", command)
    await harness.start()
    await until_async("t-0 to end", lambda: _ended(coordinator, "t-0"))
    last = coordinator.last("t-0")
    assert last is not None
    assert (last.state, last.exit_code, last.signal, last.message) == (
        state,
        exit_code,
        sig,
        message,
    )


IGNORE_TERM = (
    "import signal, sys, time, pathlib\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "pathlib.Path(sys.argv[1]).write_text('ready')\n"
    "time.sleep(60)\n"
)
EXIT_ON_TERM = (
    "import signal, sys, time, pathlib\n"
    "signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))\n"
    "pathlib.Path(sys.argv[1]).write_text('ready')\n"
    "time.sleep(60)\n"
)


@pytest.mark.parametrize(
    ("code", "how", "stop", "state", "message", "sig"),
    [
        pytest.param(
            EXIT_ON_TERM, {}, "cancel", "Cancelled", "cancelled; stopped with SIGTERM", None,
            id="cancel-obeys-sigterm",
        ),
        pytest.param(
            IGNORE_TERM, {}, "cancel", "Cancelled",
            "cancelled; killed with SIGKILL after the grace period", 9,
            id="cancel-ignores-sigterm",
        ),
        pytest.param(
            EXIT_ON_TERM, {}, "unassign", "Cancelled",
            "cancelled: no longer assigned by the coordinator; stopped with SIGTERM", None,
            id="no-longer-assigned",
        ),
        pytest.param(
            EXIT_ON_TERM, {"time_limit_seconds": 1}, None, "Failed",
            "time limit of 1 s reached; stopped with SIGTERM", None,
            id="time-limit",
        ),
    ],
)  # fmt: skip
async def test_stopping_a_worker(
    harness: Harness,
    coordinator: Coordinator,
    tmp_path: Path,
    code: str,
    how: dict,
    stop: str | None,
    state: str,
    message: str,
    sig: int | None,
) -> None:
    """Cancel, unassignment and the time limit send SIGTERM, then SIGKILL after the grace."""
    ready = tmp_path / "ready"
    task = assignment("t-0", python(code, str(ready)), **how)
    coordinator.assignments["t-0"] = task
    await harness.start()
    await until_async("the worker to start", ready.exists)
    assert harness.agent is not None
    (record,) = harness.agent.runner.records.values()
    if stop == "cancel":
        coordinator.assignments["t-0"] = task.model_copy(update={"cancel": True})
    elif stop == "unassign":
        del coordinator.assignments["t-0"]
    await until_async("t-0 to end", lambda: _ended(coordinator, "t-0"))
    last = coordinator.last("t-0")
    assert last is not None
    assert (last.state, last.message, last.signal) == (state, message, sig)
    # Failed or Cancelled is the stop's data, kept in the saved record, not read from its words.
    assert record.stop_fails == (state == "Failed")


async def test_a_stop_uses_the_grace_the_coordinator_chose(
    harness: Harness, coordinator: Coordinator, tmp_path: Path
) -> None:
    """A cancel that carries `stop_grace_seconds` (a preempted run's
    `preemption_grace_seconds`) kills a worker that ignores SIGTERM after that grace, not the
    agent's own `stop_grace_seconds` (here a minute, which the wait would never see out)."""
    harness.stop_grace_seconds = 60.0
    ready = tmp_path / "ready"
    task = assignment("t-0", python(IGNORE_TERM, str(ready)))
    coordinator.assignments["t-0"] = task
    await harness.start()
    await until_async("the worker to start", ready.exists)
    assert harness.agent is not None
    (record,) = harness.agent.runner.records.values()
    update = {"cancel": True, "stop_grace_seconds": 0.2}
    coordinator.assignments["t-0"] = task.model_copy(update=update)
    await until_async("t-0 to end", lambda: _ended(coordinator, "t-0"))
    last = coordinator.last("t-0")
    assert last is not None
    assert (last.state, last.signal) == ("Cancelled", 9)
    assert last.message == "cancelled; killed with SIGKILL after the grace period"
    assert record.stop_grace_seconds == 0.2


async def test_reports_name_the_tasks_whose_workers_run(
    harness: Harness, coordinator: Coordinator, tmp_path: Path
) -> None:
    """Every report lists the tasks whose workers the agent runs or is stopping, so the
    coordinator can free what a machine no longer runs: the worker while it lives, then none."""
    ready = tmp_path / "ready"
    coordinator.assignments["t-0"] = assignment("t-0", python(EXIT_ON_TERM, str(ready)))
    await harness.start()
    await until_async("the worker to start", ready.exists)
    await until_async("a report naming t-0", lambda: coordinator.running[-1] == [uid_of("t-0")])
    assert coordinator.running[0] == []  # the first report, before anything was assigned
    del coordinator.assignments["t-0"]
    await until_async("t-0 to end", lambda: _ended(coordinator, "t-0"))
    await until_async("a report naming no task", lambda: coordinator.running[-1] == [])


async def test_cancelled_before_start_never_runs(
    harness: Harness, coordinator: Coordinator, tmp_path: Path
) -> None:
    """A task that arrives already cancelled is reported Cancelled and never started."""
    out = tmp_path / "ran"
    coordinator.assignments["t-0"] = assignment(
        "t-0", python("open(__import__('sys').argv[1], 'w')", str(out)), cancel=True
    )
    await harness.start()
    await until_async("t-0 to end", lambda: _ended(coordinator, "t-0"))
    last = coordinator.last("t-0")
    assert last is not None
    assert (last.state, last.message) == ("Cancelled", "cancelled before it started")
    assert not out.exists()


async def test_unplaceable_assignment_fails_with_the_reason(
    harness: Harness, coordinator: Coordinator
) -> None:
    """An assignment this machine cannot honour fails with the environment's reason, unstarted."""
    coordinator.assignments["t-0"] = assignment(
        "t-0", python("pass"), network="infiniband", min_gbps=800
    )
    await harness.start()
    await until_async("t-0 to end", lambda: _ended(coordinator, "t-0"))
    last = coordinator.last("t-0")
    assert last is not None
    assert (last.state, last.message) == (
        "Failed",
        "no InfiniBand port is up at 800 Gb/s or more on machine gpu-01",
    )
    assert coordinator.states("t-0") == [TaskState.STARTING, TaskState.FAILED]


async def test_finished_task_is_forgotten_once_the_coordinator_has_it_all(
    harness: Harness, coordinator: Coordinator
) -> None:
    """After its end is acknowledged and its log shipped, a task leaves the state directory, and
    its working directory (beside the state directory) goes with what its worker left in it."""
    leave_litter = "import os; os.makedirs('scratch/deep'); print('bye', os.getcwd())"
    coordinator.assignments["t-0"] = assignment("t-0", python(leave_litter))
    agent = await harness.start()
    await until_async("t-0 to end", lambda: _ended(coordinator, "t-0"))
    await until_async("t-0 to be forgotten", lambda: uid_of("t-0") not in agent.runner.records)
    work = harness.state_dir.with_name("state-work")
    assert coordinator.log("t-0") == f"bye {work / uid_of('t-0')}\n"
    assert list((harness.state_dir / "tasks").iterdir()) == []
    assert list(work.iterdir()) == []


async def test_a_failing_scan_does_not_stop_the_agent(
    harness: Harness, coordinator: Coordinator
) -> None:
    """A scan that raises is a failed report, retried with backoff; the agent carries on."""
    calls: list[int] = []

    def flaky_scan() -> MachineReport:
        calls.append(1)
        if len(calls) == 1:
            raise OSError("sysfs went away")
        return machine_report()

    agent = harness.build(flaky_scan)
    task = asyncio.create_task(agent.run(harness.stop))
    await until_async("a successful report", lambda: coordinator.reports >= 1)
    harness.stop.set()
    await task
    assert len(calls) >= 2
    assert agent.failures == 0


SLOW_TO_LEAVE = (
    "import os, pathlib, signal, sys, time\n"
    "out = pathlib.Path(sys.argv[1])\n"
    "def stamp(suffix):\n"
    "    # Written, then renamed into place: a file the test sees always holds its time.\n"
    "    part = out.with_suffix(suffix + '.part')\n"
    "    part.write_text(repr(time.time()))\n"
    "    os.replace(part, out.with_suffix(suffix))\n"
    "def leave(*_):\n"
    "    # A real job saves a checkpoint before it exits: this one leaves once `<name>.leave`\n"
    "    # exists, so the test decides what happens while it is still leaving, whatever the load.\n"
    "    while not out.with_suffix('.leave').exists(): time.sleep(0.02)\n"
    "    stamp('.exit')\n"
    "    sys.exit(143)\n"
    "signal.signal(signal.SIGTERM, leave)\n"
    "stamp('.start')\n"
    "while True: time.sleep(0.05)\n"
)


def _term_sent(harness: Harness, task: str) -> bool:
    assert harness.agent is not None
    records = harness.agent.runner.records.values()
    return any(r.task == task and r.term_sent_at is not None for r in records)


async def test_a_new_task_starts_only_once_its_gpus_are_free(
    harness: Harness, coordinator: Coordinator, tmp_path: Path
) -> None:
    """A restored backup replaces what runs on a GPU: `old-0` holds GPU 0, then the coordinator
    assigns `new-0` on GPU 0 instead. The agent stops `old-0` first and starts `new-0` only
    after `old-0` has exited, never both on GPU 0 at once; `other-0` on GPU 1 starts at once,
    while `old-0` is still leaving (it leaves only when the test says so: no timing here)."""
    harness.stop_grace_seconds = 60.0  # old-0 is never killed: it leaves when told
    gpu0, gpu1 = {"assigned_gpu_ids": [uuid(0)]}, {"assigned_gpu_ids": [uuid(1)]}
    coordinator.assignments["old-0"] = assignment(
        "old-0", python(SLOW_TO_LEAVE, str(tmp_path / "old")), **gpu0
    )
    await harness.start()
    await until_async("old-0 to start", (tmp_path / "old.start").exists)
    coordinator.assignments = {
        "new-0": assignment("new-0", python(SLOW_TO_LEAVE, str(tmp_path / "new")), **gpu0),
        "other-0": assignment("other-0", python(SLOW_TO_LEAVE, str(tmp_path / "other")), **gpu1),
    }
    await until_async("other-0 to start", (tmp_path / "other.start").exists)
    await until_async(
        "old-0 to be told to stop",
        lambda: _term_sent(harness, "old-0"),
    )
    assert not (tmp_path / "new.start").exists()  # old-0 is still leaving GPU 0
    (tmp_path / "old.leave").touch()
    await until_async("new-0 to start", (tmp_path / "new.start").exists)
    assert float((tmp_path / "new.start").read_text()) > float((tmp_path / "old.exit").read_text())
    for name in ("new", "other"):
        (tmp_path / f"{name}.leave").touch()  # they leave at once when the test ends
    await until_async("old-0 reported ended", lambda: _ended(coordinator, "old-0"))
    last = coordinator.last("old-0")
    assert last is not None
    assert last.state == "Cancelled"
