"""Choosing how workers are started, and the exact systemd-run and container command lines."""

import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from runtime_rig import assignment, uuid

from astraeus.agent.environment import worker_environment
from astraeus.agent.runtime import (
    choose_launcher,
    container_command,
    container_runtime,
    runtime_capabilities,
)
from astraeus.agent.runtime.launch import (
    ProcessLauncher,
    SystemdLauncher,
    memlock,
    proc_alive,
    proc_start_time,
    systemd_run_command,
)
from astraeus.agent.runtime.main import uverbs_nodes
from astraeus.agent.runtime.state import worker_name
from astraeus.shared import SCHEMA_VERSION, DriveInfo, MachineReport, Mount


def _which(*present: str) -> Callable[[str], str | None]:
    return lambda name: f"/usr/bin/{name}" if name in present else None


@pytest.mark.parametrize(
    ("pid1", "present", "kind"),
    [
        pytest.param("systemd", ("systemd-run",), SystemdLauncher, id="systemd"),
        pytest.param("systemd", (), ProcessLauncher, id="systemd-without-systemd-run"),
        pytest.param("tini", ("systemd-run",), ProcessLauncher, id="container-init"),
    ],
)
def test_launcher_choice(pid1: str, present: tuple[str, ...], kind: type) -> None:
    """Transient units only when systemd is PID 1 and systemd-run exists."""
    assert isinstance(choose_launcher(pid1=pid1, which=_which(*present)), kind)


def test_launcher_choice_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    """The log says which way workers run and why."""
    caplog.set_level("INFO")
    choose_launcher(pid1="tini", which=_which())
    assert caplog.messages[0].startswith(
        "workers run as child processes in their own session (PID 1 is tini, not systemd); "
        "locked memory: "
    )


def test_systemd_run_command() -> None:
    """A worker's unit: unlimited memlock, its CPU and memory, collected when it ends."""
    task = assignment("train-3", ["python"], cpu_cores=12.5, memory_bytes=64 * 1024**3)
    unit = worker_name(task)
    assert systemd_run_command(unit, task, ["shim", "spec.json"]) == [
        "systemd-run",
        "--unit=astraeus-vision-train-3",
        "--description=Astraeus task train-3",
        "--collect",
        "--quiet",
        "--property=LimitMEMLOCK=infinity",
        "--property=KillMode=control-group",
        "--property=CPUQuota=1250%",
        "--property=MemoryMax=68719476736",
        "--",
        "shim",
        "spec.json",
    ]


def _report() -> MachineReport:
    return MachineReport.model_validate(
        {
            "schema_version": SCHEMA_VERSION,
            "name": "gpu-01",
            "cpu_cores": 8,
            "memory_bytes": 1,
            "gpus": [
                {"index": i, "uuid": uuid(i), "vendor": "nvidia", "model": "m", "memory_bytes": 1}
                for i in range(2)
            ],
            "rdma_ports": [
                {"device": "mlx5_0", "port": 1, "state": "ACTIVE", "link_layer": "InfiniBand",
                 "rate_gbps": 400}
            ],
        }
    )  # fmt: skip


RUN = assignment(
    "t-0",
    ["python", "train.py"],
    image="nvcr.io/nvidia/pytorch:24.05-py3",
    env={"EPOCHS": "3"},
    assigned_gpu_ids=[uuid(0), uuid(1)],
    network="infiniband",
    cpu_cores=16,
    memory_bytes=2 * 1024**3,
)
SHARED = [
    "run",
    "--rm",
    "--name",
    "astraeus-vision-t-0",
    "--network=host",
    "--shm-size=1073741824",
    "--ulimit",
    "memlock=-1:-1",
    "--cap-add=IPC_LOCK",
]
TAIL = ["--cpus=16", "--memory=2147483648"]


@pytest.mark.parametrize(
    ("runtime", "devices"),
    [
        pytest.param(
            "/usr/bin/podman",
            [
                f"--device=nvidia.com/gpu={uuid(0)}",
                f"--device=nvidia.com/gpu={uuid(1)}",
                "--device=/dev/infiniband",
            ],
            id="podman-cdi",
        ),
        pytest.param(
            "/usr/bin/docker",
            [f'--gpus="device={uuid(0)},{uuid(1)}"', "--device=/dev/infiniband"],
            id="docker-gpus",
        ),
    ],
)
def test_container_command(runtime: str, devices: list[str]) -> None:
    """The container gets its GPUs, RDMA devices, shm, memlock, IPC_LOCK and variable names."""
    worker = worker_environment(RUN, _report())
    names = [arg for name in sorted({"EPOCHS", *worker.env}) for arg in ("--env", name)]
    assert container_command(runtime, RUN, worker) == [
        runtime,
        *SHARED,
        *devices,
        *TAIL,
        *names,
        "nvcr.io/nvidia/pytorch:24.05-py3",
        "python",
        "train.py",
    ]


@pytest.mark.parametrize(
    ("present", "runtime", "capabilities"),
    [
        pytest.param(("podman", "docker"), "/usr/bin/podman", ["container"], id="podman-first"),
        pytest.param(("docker",), "/usr/bin/docker", ["container"], id="docker"),
        pytest.param((), None, [], id="none"),
    ],
)
def test_container_capability(
    present: tuple[str, ...], runtime: str | None, capabilities: list[str]
) -> None:
    """The container capability is reported only where podman or docker is installed."""
    assert container_runtime(_which(*present)) == runtime
    assert runtime_capabilities(_which(*present)) == capabilities


def test_proc_alive_tells_a_zombie_and_a_reused_pid() -> None:
    """A live process is alive; with another start time, or once it ended, it is not."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        start = proc_start_time(child.pid)
        assert proc_alive(child.pid, start)
        assert start is not None
        assert not proc_alive(child.pid, start + 1)
    finally:
        child.kill()
        child.wait()
    assert not proc_alive(child.pid, start)


def test_uverbs_nodes_from_sysfs(tmp_path: Path) -> None:
    """Each RDMA device maps to the uverbs node its sysfs device lists."""
    for device, verbs in (("mlx5_0", "uverbs0"), ("ibp12s0", "uverbs3")):
        (tmp_path / "class" / "infiniband" / device / "device" / "infiniband_verbs" / verbs).mkdir(
            parents=True
        )
    assert uverbs_nodes(tmp_path) == {
        "ibp12s0": "/dev/infiniband/uverbs3",
        "mlx5_0": "/dev/infiniband/uverbs0",
    }


@pytest.mark.parametrize(
    ("capeff", "unlimited"),
    [
        pytest.param("000001ffffffffff", True, id="cap-sys-resource"),
        pytest.param("000001fffeffffff", False, id="root-in-a-container-without-it"),
    ],
)
def test_memlock_log_reads_the_capability(tmp_path: Path, capeff: str, unlimited: bool) -> None:
    """Unlimited locked memory is announced only with CAP_SYS_RESOURCE (or no hard limit)."""
    status = tmp_path / "status"
    status.write_text(f"Name:\tastraeus-agent\nCapEff:\t{capeff}\n")
    hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    expected = (
        "locked memory: unlimited"
        if unlimited or hard == resource.RLIM_INFINITY
        else f"locked memory: raised to the hard limit {hard} bytes (unlimited needs "
        "CAP_SYS_RESOURCE)"
    )
    assert memlock(status) == expected


def test_container_command_bind_mounts_the_drives() -> None:
    """Each drive is a bind mount from its path on the machine to the run's mount_path."""
    run = RUN.model_copy(update={"drives": [Mount(name="datasets", mount_path="/data")]})
    report = _report().model_copy(
        update={"drives": [DriveInfo(name="datasets", path="/mnt/datasets")]}
    )
    command = container_command("/usr/bin/podman", run, worker_environment(run, report))
    assert "--mount=type=bind,source=/mnt/datasets,target=/data" in command
    assert command.index("--mount=type=bind,source=/mnt/datasets,target=/data") < command.index(
        "nvcr.io/nvidia/pytorch:24.05-py3"
    )
