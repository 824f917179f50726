"""Choosing how workers are started, and the exact systemd-run and container command lines."""

import resource
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from runtime_rig import assignment, uid_of

from astraeus.agent.runtime import choose_launcher
from astraeus.agent.runtime.launch import (
    ProcessLauncher,
    SystemdLauncher,
    device_allow,
    memlock,
    proc_alive,
    proc_start_time,
    systemctl_kill_command,
    systemd_run_command,
)
from astraeus.agent.runtime.main import uverbs_nodes
from astraeus.agent.runtime.state import worker_name
from astraeus.shared import PortSpan

WORLD_OF_ONE = {
    "master_addr": "127.0.0.1",
    "world_size": 1,
    "rank": 0,
    "node_rank": 0,
    "local_world_size": 1,
}
"""A one-worker run's rendezvous: no `master_port` (it holds none)."""


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
    """A worker's unit: unlimited memlock, its CPU and memory, a private /tmp, collected when
    it ends, and no device but the pseudo-devices and its own (DevicePolicy=closed)."""
    task = assignment("train-3", ["python"], cpu_cores=12.5, memory_bytes=64 * 1024**3)
    unit = worker_name(task)
    devices = ("/dev/nvidia3", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
    assert systemd_run_command(unit, task, ["shim", "spec.json"], devices) == [
        "systemd-run",
        f"--unit=astraeus-vision-train-3-{uid_of('train-3')}",
        "--description=Astraeus task train-3",
        "--collect",
        "--quiet",
        "--property=LimitMEMLOCK=infinity",
        "--property=KillMode=control-group",
        "--property=PrivateTmp=yes",
        "--property=ProtectProc=invisible",
        "--property=CPUQuota=1250%",
        "--property=MemoryMax=68719476736",
        "--property=DevicePolicy=closed",
        "--property=DeviceAllow=/dev/nvidia3 rw",
        "--property=DeviceAllow=/dev/nvidiactl rw",
        "--property=DeviceAllow=/dev/nvidia-uvm rw",
        "--property=DeviceAllow=/dev/nvidia-uvm-tools rw",
        "--",
        "shim",
        "spec.json",
    ]


def test_a_worker_may_bind_no_port_of_the_range_but_its_runs_own() -> None:
    """Under systemd a worker gets `SocketBindAllow=` its run's port (worker 0's MASTER_PORT)
    before `SocketBindDeny=` the whole rendezvous range (an allow entry wins, whatever the
    order), and `ProtectProc=invisible`: another tenant's worker cannot take the range's ports,
    nor read other users' command lines in /proc. A world of one (no port in the range) is
    denied the whole range; without the range (an older coordinator) no fence is set."""
    span = PortSpan(first=29500, last=30499)
    task = assignment("train-0", ["python"])  # rank 0 of 2, master_port 29500
    command = systemd_run_command(worker_name(task), task, ["shim"], (), span)
    fence = [arg for arg in command if "SocketBind" in arg or "ProtectProc" in arg]
    assert fence == [
        "--property=ProtectProc=invisible",
        "--property=SocketBindAllow=29500",
        "--property=SocketBindDeny=29500-30499",
    ]
    alone = assignment("solo-0", ["python"], rendezvous=WORLD_OF_ONE)
    command = systemd_run_command(worker_name(alone), alone, ["shim"], (), span)
    assert [arg for arg in command if "SocketBind" in arg] == [
        "--property=SocketBindDeny=29500-30499"
    ]
    assert [arg for arg in systemd_run_command("u", task, ["shim"]) if "SocketBind" in arg] == []


def test_an_older_systemd_gets_no_property_it_does_not_know() -> None:
    """systemd 247-248 knows ProtectProc= but not SocketBind*=; 246 neither: the unit would be
    refused, so they are left out (the agent says so when it starts)."""
    span = PortSpan(first=29500, last=30499)
    task = assignment("train-0", ["python"])
    for version, wanted in ((248, ["ProtectProc=invisible"]), (246, [])):
        command = systemd_run_command("u", task, ["shim"], (), span, version)
        got = [arg.removeprefix("--property=") for arg in command]
        assert [p for p in got if p.startswith(("SocketBind", "ProtectProc"))] == wanted


def test_cpu_worker_unit_allows_no_device() -> None:
    """A worker without GPUs gets DevicePolicy=closed and not one DeviceAllow=."""
    task = assignment("cpu-0", ["python"])
    command = systemd_run_command(worker_name(task), task, ["shim"], ())
    assert "--property=DevicePolicy=closed" in command
    assert [arg for arg in command if "DeviceAllow" in arg] == []


def test_device_allow_for_the_whole_infiniband_directory() -> None:
    """`/dev/infiniband` (uverbs nodes unknown) becomes rdma_cm and the verbs device class."""
    assert device_allow(("/dev/nvidia0", "/dev/infiniband")) == [
        "/dev/nvidia0 rw",
        "/dev/infiniband/rdma_cm rw",
        "char-infiniband_verbs rw",
    ]


@pytest.mark.parametrize(
    ("sig", "expected"),
    [
        pytest.param(signal.SIGTERM, "--signal=SIGTERM", id="term-passed-on"),
        pytest.param(signal.SIGKILL, "--signal=SIGUSR1", id="kill-asks-the-shim"),
    ],
)
def test_systemctl_kill_goes_to_the_shim(sig: signal.Signals, expected: str) -> None:
    """Stops go to the unit's main process, the shim, which passes SIGTERM on and turns the
    agent's SIGKILL (SIGUSR1) into SIGKILL for every process of the worker."""
    assert systemctl_kill_command("astraeus-vision-t-0", sig) == [
        "systemctl", "kill", "--kill-who=main", expected, "astraeus-vision-t-0"
    ]  # fmt: skip


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
