"""What each launch mode gives a GPU worker beyond its command (the guide: "a larger /dev/shm
and unlimited locked memory"): a systemd unit gets a private /dev/shm of the task's size and
unlimited locked memory; a plain process gets neither for sure, and its first log line and
`astraeus-agent inspect` say so."""

from pathlib import Path

import pytest
from helpers import until_async
from runtime_rig import Coordinator, Harness, assignment, machine_report, python, uuid

from astraeus.agent.cli import gpu_workers_line, main
from astraeus.agent.environment import worker_environment
from astraeus.agent.runtime.launch import (
    ProcessLauncher,
    Promised,
    SystemdLauncher,
    inspect_launcher,
    machine_shm,
    memlock_limit,
    promised,
    systemd_run_command,
)
from astraeus.agent.runtime.state import worker_name
from astraeus.shared import Assignment
from astraeus.shared.sizes import size_text

GIB = 1024**3


def _gpu_task(task: str = "t-0", **extra: object) -> Assignment:
    return assignment(
        task, ["python"], assigned_gpu_ids=[uuid(0)], network="local", memory_bytes=16 * GIB,
        **extra,
    )  # fmt: skip


def test_a_gpu_worker_is_owed_a_private_shm_and_unlimited_memlock_a_container_nothing() -> None:
    """Half the task's memory of /dev/shm and unlimited locked memory for a GPU worker; a CPU
    worker is owed no /dev/shm; a container gets both from its runtime."""
    report = machine_report()
    gpu = _gpu_task()
    assert promised(gpu, worker_environment(gpu, report)) == Promised(8 * GIB, memlock=True)
    cpu = assignment("c-0", ["python"], network="local")
    assert promised(cpu, worker_environment(cpu, report)) == Promised(None, memlock=False)
    image = _gpu_task(image="nvcr.io/nvidia/pytorch:24.08-py3")
    assert promised(image, worker_environment(image, report)) == Promised()


def test_a_systemd_unit_mounts_a_private_dev_shm_of_the_tasks_size() -> None:
    """systemd 238 and later: `TemporaryFileSystem=/dev/shm` of the task's size, writable by
    the worker's user (mode 1777) and `LimitMEMLOCK=infinity`; 237 knows no such property, so it
    is left out and the worker's log says what it lacks."""
    task = _gpu_task()
    command = systemd_run_command(worker_name(task), task, ["shim"], version=238, shm_bytes=8 * GIB)
    properties = [a.removeprefix("--property=") for a in command if a.startswith("--property=")]
    assert "LimitMEMLOCK=infinity" in properties
    assert "TemporaryFileSystem=/dev/shm:size=8589934592,mode=1777,nosuid,nodev" in properties
    old = systemd_run_command(worker_name(task), task, ["shim"], version=237, shm_bytes=8 * GIB)
    assert [a for a in old if "TemporaryFileSystem" in a] == []
    assert [a for a in systemd_run_command("u", task, ["shim"]) if "TemporaryFileSystem" in a] == []
    owed = Promised(8 * GIB, memlock=True)
    assert SystemdLauncher(version=252).shortfall(owed) is None
    assert SystemdLauncher(version=237).shortfall(owed) == (
        "astraeus: this worker's systemd unit has no private /dev/shm of 8 GiB (systemd 237 is "
        f"older than 238, which knows TemporaryFileSystem=): {machine_shm()}"
    )


def test_each_launcher_says_what_gpu_workers_get() -> None:
    """The text `inspect` prints and the agent logs at start."""
    assert SystemdLauncher(version=252).gives() == (
        "systemd units (systemd 252): a private /dev/shm of half the task's memory (at least "
        "1 GiB); locked memory unlimited"
    )
    assert (
        SystemdLauncher(version=237)
        .gives()
        .startswith("systemd units (systemd 237): the machine's /dev/shm (")
    )
    plain = ProcessLauncher("PID 1 is tini, not systemd").gives()
    assert plain.startswith("plain processes (PID 1 is tini, not systemd): the machine's /dev/shm")
    assert plain.endswith("containers (runs with an image) get both")


async def test_a_plain_gpu_worker_is_told_what_it_lacks_in_its_first_log_line(
    harness: Harness, coordinator: Coordinator
) -> None:
    """A GPU worker started as a plain process: the first line of its log says it has no
    private /dev/shm of its task's size (and how much locked memory it may have, where that is
    not unlimited); a CPU worker's log has no such line."""
    coordinator.assignments["t-0"] = _gpu_task("t-0").model_copy(
        update={"command": python("print('hello')")}
    )
    coordinator.assignments["c-0"] = assignment("c-0", python("print('hello')"), network="local")
    await harness.start()
    await until_async("both to end", lambda: all(
        (last := coordinator.last(t)) is not None and last.state.ended for t in ("t-0", "c-0")
    ))  # fmt: skip
    first = coordinator.log("t-0").splitlines()[0]
    lacks = [f"no private /dev/shm of 8 GiB: {machine_shm()}"]
    limit = memlock_limit()
    if limit is not None:
        lacks.append(f"locked memory only up to {size_text(limit)} (unlimited needs "
                     "CAP_SYS_RESOURCE)")  # fmt: skip
    assert first == f"astraeus: this worker runs as a plain process: {'; '.join(lacks)}"
    assert coordinator.log("t-0").splitlines()[1:] == ["hello"]
    assert coordinator.log("c-0").splitlines() == ["hello"]


def test_inspect_says_what_gpu_workers_get(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`inspect` prints the launch mode's line: here, what the agent would use on this host."""
    assert main(["inspect", "--backend", "fake:l40s-pcie", "--data-dir", f"{tmp_path}/d"]) == 0
    out = capsys.readouterr().out
    assert f"\nGPU workers: {gpu_workers_line()}\n" in out
    assert gpu_workers_line() == inspect_launcher().gives()
