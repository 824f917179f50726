"""The agent as a real process (`astraeus-agent run` on a fake H100 machine): SIGTERM, and a
restart under a worker."""

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

from helpers import until_async
from runtime_rig import TOKEN, Coordinator, assignment, python, uid_of

from astraeus.agent.runtime.launch import proc_alive
from astraeus.shared import TaskState

WAIT_FOR_GO = (
    "import pathlib, sys, time\n"
    "while not pathlib.Path(sys.argv[1]).exists():\n"
    "    time.sleep(0.02)\n"
)


async def _agent(tmp_path: Path, coordinator: Coordinator) -> asyncio.subprocess.Process:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    # The worker reads a file in this test's private folder: it runs as the test's own user.
    env = {
        **os.environ,
        "ASTRAEUS_REPORT_INTERVAL_SECONDS": "0.1",
        "ASTRAEUS_WORKER_USER": "root",
        "ASTRAEUS_ALLOW_ROOT_WORKERS": "true",
    }
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "astraeus.agent.cli", "run", "--backend", "fake:h100-sxm",
        "--coordinator", coordinator.url, "--token-file", str(token), "--name", "gpu-01",
        "--state-dir", str(tmp_path / "state"),
        env=env, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


def _state(coordinator: Coordinator) -> TaskState | None:
    last = coordinator.last("t-0")
    return last.state if last else None


async def test_agent_process_restarts_under_a_running_worker(
    coordinator: Coordinator, tmp_path: Path
) -> None:
    """SIGTERM stops the agent with exit 0 and leaves its worker; the next agent reports its end."""
    go = tmp_path / "go"
    coordinator.assignments["t-0"] = assignment("t-0", python(WAIT_FOR_GO, str(go)))
    first = await _agent(tmp_path, coordinator)
    await until_async("the worker to run", lambda: _state(coordinator) is TaskState.RUNNING)
    first.send_signal(signal.SIGTERM)
    _, stderr = await first.communicate()
    assert first.returncode == 0, stderr.decode()
    assert "workers run as child processes in their own session" in stderr.decode()
    record = json.loads((tmp_path / "state" / "tasks" / uid_of("t-0") / "record.json").read_text())
    assert proc_alive(record["pid"], record["pid_start"])
    second = await _agent(tmp_path, coordinator)
    try:
        go.write_text("go")
        await until_async("the end to arrive", lambda: _state(coordinator) is TaskState.SUCCEEDED)
    finally:
        go.write_text("go")  # never leave the worker waiting, even when the test fails
        second.send_signal(signal.SIGTERM)
        await second.communicate()
    assert coordinator.states("t-0") == [
        TaskState.STARTING,
        TaskState.RUNNING,
        TaskState.SUCCEEDED,
    ]
