"""Agent restarts and coordinator outages lose nothing: workers run on, states arrive in order."""

import asyncio
import json
import os
import signal
from pathlib import Path

from helpers import until_async
from runtime_rig import Coordinator, Harness, assignment, python, uid_of

from astraeus.agent.runtime import StateDir
from astraeus.agent.runtime.launch import proc_alive
from astraeus.agent.runtime.runner import LOST
from astraeus.shared import TaskState

WAIT_FOR_GO = (
    "import pathlib, sys, time\n"
    "go = pathlib.Path(sys.argv[1])\n"
    "print('waiting', flush=True)\n"
    "while not go.exists():\n"
    "    time.sleep(0.02)\n"
    "print('done', flush=True)\n"
    "sys.exit(int(sys.argv[2]))\n"
)


def _state(coordinator: Coordinator, task: str) -> TaskState | None:
    last = coordinator.last(task)
    return last.state if last else None


def _pid(state_dir: Path, task: str) -> int:
    record = {r.task: r for r in StateDir(state_dir).records()}[task]
    assert record.pid is not None
    return record.pid


async def test_restarted_agent_finds_its_worker_and_its_exit_code(
    harness: Harness, coordinator: Coordinator, tmp_path: Path
) -> None:
    """A worker outlives its agent; the next agent reports how it ended, without restarting it."""
    go = tmp_path / "go"
    coordinator.assignments["t-0"] = assignment("t-0", python(WAIT_FOR_GO, str(go), "7"))
    await harness.start()
    await until_async("t-0 to run", lambda: _state(coordinator, "t-0") is TaskState.RUNNING)
    await harness.halt()
    pid = _pid(harness.state_dir, "t-0")
    assert proc_alive(pid, None)
    await harness.start()
    go.write_text("go")
    await until_async("t-0 to end", lambda: _state(coordinator, "t-0") is TaskState.FAILED)
    last = coordinator.last("t-0")
    assert last is not None
    assert (last.exit_code, last.message) == (7, "exited with code 7")
    assert coordinator.states("t-0") == [TaskState.STARTING, TaskState.RUNNING, TaskState.FAILED]
    await until_async("the whole log", lambda: "done" in coordinator.log("t-0"))
    assert coordinator.log("t-0") == "waiting\ndone\n"


async def test_worker_that_ended_while_the_agent_was_down(
    harness: Harness, coordinator: Coordinator, tmp_path: Path
) -> None:
    """A worker that ended while no agent ran is reported with its real exit code."""
    go = tmp_path / "go"
    coordinator.assignments["t-0"] = assignment("t-0", python(WAIT_FOR_GO, str(go), "0"))
    await harness.start()
    await until_async("t-0 to run", lambda: _state(coordinator, "t-0") is TaskState.RUNNING)
    await harness.halt()
    go.write_text("go")
    status = harness.state_dir / "tasks" / uid_of("t-0") / "status.json"
    await until_async("the shim to record the exit", status.exists)
    await harness.start()
    await until_async("t-0 to succeed", lambda: _state(coordinator, "t-0") is TaskState.SUCCEEDED)


async def test_worker_killed_with_its_shim_while_the_agent_was_down_is_lost(
    harness: Harness, coordinator: Coordinator, tmp_path: Path
) -> None:
    """When nothing recorded how a worker ended, the next agent reports it Lost."""
    coordinator.assignments["t-0"] = assignment(
        "t-0", python(WAIT_FOR_GO, str(tmp_path / "never"), "0")
    )
    await harness.start()
    await until_async("t-0 to run", lambda: _state(coordinator, "t-0") is TaskState.RUNNING)
    await harness.halt()
    os.killpg(_pid(harness.state_dir, "t-0"), signal.SIGKILL)
    await harness.start()
    await until_async("t-0 to be lost", lambda: _state(coordinator, "t-0") is TaskState.LOST)
    last = coordinator.last("t-0")
    assert last is not None
    assert last.message == LOST


async def test_coordinator_outage_during_a_run_loses_nothing(
    harness: Harness, coordinator: Coordinator, tmp_path: Path
) -> None:
    """Through an outage the worker runs on and ends; afterwards every state and byte arrives."""
    go = tmp_path / "go"
    coordinator.assignments["t-0"] = assignment("t-0", python(WAIT_FOR_GO, str(go), "0"))
    agent = await harness.start()
    await until_async("t-0 to run", lambda: _state(coordinator, "t-0") is TaskState.RUNNING)
    await coordinator.down()
    reports = coordinator.reports
    go.write_text("go")
    await until_async("several failed reports", lambda: agent.failures >= 3)
    record = agent.runner.records[uid_of("t-0")]
    await until_async("t-0 to end in the outage", lambda: record.state is TaskState.SUCCEEDED)
    assert coordinator.reports == reports
    await coordinator.start()
    await until_async(
        "the end to arrive", lambda: _state(coordinator, "t-0") is TaskState.SUCCEEDED
    )
    assert sorted(coordinator.updates) == list(range(len(coordinator.updates)))
    assert coordinator.states("t-0") == [
        TaskState.STARTING,
        TaskState.RUNNING,
        TaskState.SUCCEEDED,
    ]
    await until_async("the whole log", lambda: "done" in coordinator.log("t-0"))
    assert coordinator.log("t-0") == "waiting\ndone\n"
    await until_async("every update to be acknowledged", lambda: agent.runner.outbox.pending == [])


async def test_stop_does_not_wait_for_a_report_in_flight(
    harness: Harness, coordinator: Coordinator
) -> None:
    """A stop during a report that gets no answer ends the agent at once, not at the timeout."""
    coordinator.hold = asyncio.Event()
    await harness.start()
    await until_async("a report to arrive", lambda: coordinator.arrived >= 1)
    await asyncio.wait_for(harness.halt(), timeout=10)
    assert harness.task is not None
    assert harness.task.done()
    coordinator.hold.set()


def _to_before_uids(state_dir: Path, tasks: list[str]) -> None:
    """Rewrite the state directory as an agent from before task uids left it: records whose
    assignment has no `task_uid`, and an outbox update naming its task by name."""
    for folder in (state_dir / "tasks").iterdir():
        path = folder / "record.json"
        record = json.loads(path.read_text())
        del record["assignment"]["task_uid"]
        for new in ("folder", "stand_in", "replay"):
            record.pop(new, None)
        path.write_text(json.dumps(record))
    outbox = json.loads((state_dir / "outbox.json").read_text())
    at = "2026-01-01T00:00:00+00:00"
    old = [
        {"seq": outbox["next_seq"], "task": task, "state": "Running", "at": at} for task in tasks
    ]
    path = state_dir / "outbox.json"
    path.write_text(json.dumps({"next_seq": outbox["next_seq"] + len(old), "pending": old}))


async def test_an_upgraded_agent_adopts_tasks_from_before_task_uids(
    harness: Harness, coordinator: Coordinator, tmp_path: Path
) -> None:
    """Tasks an agent started before task uids are found again: the one the coordinator still
    assigns is adopted under its uid (same worker, its end and whole log reported), the other is
    stopped, and nothing is reported under a made-up uid, nor a list of running tasks that
    would leave them out."""
    go = tmp_path / "go"
    coordinator.assignments["t-0"] = assignment("t-0", python(WAIT_FOR_GO, str(go), "0"))
    never = tmp_path / "never"
    coordinator.assignments["t-1"] = assignment("t-1", python(WAIT_FOR_GO, str(never), "0"))
    await harness.start()
    await until_async("t-1 to run", lambda: _state(coordinator, "t-1") is TaskState.RUNNING)
    await until_async("t-0 to run", lambda: _state(coordinator, "t-0") is TaskState.RUNNING)
    await harness.halt()
    pids = {task: _pid(harness.state_dir, task) for task in ("t-0", "t-1")}
    _to_before_uids(harness.state_dir, ["t-1"])
    del coordinator.assignments["t-1"]
    seen = len(coordinator.updates)
    go.write_text("go")  # t-0 ends while no agent watches
    await until_async("t-0's worker to end", lambda: not proc_alive(pids["t-0"], None))
    first = len(coordinator.running)
    agent = await harness.start()
    await until_async("t-0's end", lambda: _state(coordinator, "t-0") is TaskState.SUCCEEDED)
    # Not said while t-0 and t-1 wait for their uids: a list without them would be a lie.
    assert coordinator.running[first] is None
    await until_async("t-0's whole log", lambda: "done" in coordinator.log("t-0"))
    assert coordinator.log("t-0") == "waiting\ndone\n"
    await until_async("t-1's worker to be stopped", lambda: not proc_alive(pids["t-1"], None))
    # Its record is kept under a stand-in uid until it is forgotten, so look for it by name.
    await until_async(
        "t-1 to be forgotten", lambda: all(r.task != "t-1" for r in agent.runner.records.values())
    )
    later = [update for seq, update in sorted(coordinator.updates.items()) if seq >= seen]
    assert [(u.task_uid, u.state) for u in later] == [(uid_of("t-0"), TaskState.SUCCEEDED)]
    assert [r.pid for r in agent.runner.records.values()] in ([], [pids["t-0"]])
