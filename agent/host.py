"""The host: cores, memory, PSI, free disk at the data directory, and the pressure conditions
with kubelet's default eviction thresholds (docs/hardware.md §8). Reads files under configurable
`/proc` and `/sys` roots; a missing file degrades one figure, never the report."""

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from astraeus.shared import PressureCondition

from .cores import Cores, read_cores
from .meminfo import read_memory

MEMORY_AVAILABLE_MIN_BYTES = 100 * 1024 * 1024
"""kubelet `memory.available<100Mi`."""
NODEFS_AVAILABLE_MIN = 0.10
"""kubelet `nodefs.available<10%`."""
NODEFS_INODES_FREE_MIN = 0.05
"""kubelet `nodefs.inodesFree<5%`."""
PID_AVAILABLE_MIN = 0.05
"""kubelet has no default for `pid.available`; ours is 5% of `pid_max` (docs/agent.md)."""
CPU_PRESSURE_SOME_AVG10 = 50.0
"""CPU pressure: `some avg10` of /proc/pressure/cpu at or above this percent (docs/agent.md)."""


class DiskStats(NamedTuple):
    total_bytes: int
    free_bytes: int
    total_inodes: int
    free_inodes: int


def statvfs_disk(path: Path) -> DiskStats:
    """The real disk figures for the filesystem holding `path`."""
    st = os.statvfs(path)
    return DiskStats(
        total_bytes=st.f_blocks * st.f_frsize,
        free_bytes=st.f_bavail * st.f_frsize,
        total_inodes=st.f_files,
        free_inodes=st.f_favail,
    )


DiskReader = Callable[[Path], DiskStats]

Psi = dict[str, dict[str, float]]


@dataclass
class HostState:
    cores: float = 0.0
    """Allocatable: the online CPUs, capped by the agent's cgroup CPU quota."""
    cpu: Cores = field(default_factory=Cores)
    memory_bytes: int = 0
    memory_available_bytes: int | None = None
    memory_estimated: bool = False
    load1: float | None = None
    psi: dict[str, Psi] = field(default_factory=dict)
    disk: DiskStats | None = None
    processes: int | None = None
    pid_max: int | None = None
    conditions: list[PressureCondition] = field(default_factory=list)
    cpu_pressure: bool = False
    problems: list[str] = field(default_factory=list)


def read_host(
    proc_root: Path, sysfs_root: Path, data_dir: Path, disk: DiskReader = statvfs_disk
) -> HostState:
    """Everything the report needs about the host, with the pressure conditions decided."""
    host = HostState()
    host.cpu = read_cores(proc_root, sysfs_root)
    host.cores = host.cpu.allocatable
    memory = read_memory(proc_root)
    host.memory_bytes, host.memory_available_bytes = memory.total_bytes, memory.available_bytes
    host.memory_estimated = memory.estimated
    host.problems += host.cpu.problems + memory.problems
    host.load1, host.processes = _loadavg(proc_root, host)
    host.pid_max = _int_file(proc_root / "sys/kernel/pid_max")
    host.psi = {kind: read_psi(proc_root / "pressure" / kind) for kind in ("cpu", "memory", "io")}
    try:
        host.disk = disk(data_dir)
    except OSError as exc:
        host.problems.append(f"cannot stat the data directory {data_dir}: {exc.strerror}")
    host.conditions = conditions(host)
    host.cpu_pressure = host.psi["cpu"].get("some", {}).get("avg10", 0.0) >= CPU_PRESSURE_SOME_AVG10
    return host


def conditions(host: HostState) -> list[PressureCondition]:
    """MemoryPressure, DiskPressure and PIDPressure, each only when its signal is known."""
    found = []
    available = host.memory_available_bytes
    if available is not None and available < MEMORY_AVAILABLE_MIN_BYTES:
        found.append(PressureCondition.MEMORY)
    if host.disk is not None and _disk_short(host.disk):
        found.append(PressureCondition.DISK)
    pids, pid_max = host.processes, host.pid_max
    if pids is not None and pid_max and (pid_max - pids) / pid_max < PID_AVAILABLE_MIN:
        found.append(PressureCondition.PID)
    return found


def _disk_short(disk: DiskStats) -> bool:
    space_short = disk.total_bytes > 0 and disk.free_bytes / disk.total_bytes < NODEFS_AVAILABLE_MIN
    inodes = disk.total_inodes > 0 and disk.free_inodes / disk.total_inodes < NODEFS_INODES_FREE_MIN
    return space_short or inodes


def read_psi(path: Path) -> Psi:
    """`{"some": {"avg10": 0.0, ..., "total": 0}, "full": {...}}`; empty when PSI is off."""
    try:
        text = path.read_text()
    except OSError:
        return {}
    psi: Psi = {}
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        values = (pair.split("=", 1) for pair in rest.split() if "=" in pair)
        try:
            psi[kind] = {k: float(v) for k, v in values}
        except ValueError:
            continue  # a line we cannot read costs that line only
    return psi


def _loadavg(proc_root: Path, host: HostState) -> tuple[float | None, int | None]:
    try:
        fields = (proc_root / "loadavg").read_text().split()
        return float(fields[0]), int(fields[3].split("/")[1])
    except (OSError, IndexError, ValueError):
        host.problems.append("cannot read loadavg")
        return None, None


def _int_file(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None
