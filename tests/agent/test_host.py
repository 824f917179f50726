"""Host figures and pressure conditions read from /proc and /sys fixture trees."""

from pathlib import Path

import pytest

from astraeus.agent.host import DiskStats, HostState, conditions, read_host, read_psi
from astraeus.shared import PressureCondition

MIB = 1024 * 1024
ROOMY_DISK = DiskStats(total_bytes=1000, free_bytes=500, total_inodes=1000, free_inodes=900)


def _put(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_psi_with_both_lines_parses_avgs_and_total(tmp_path: Path) -> None:
    """Both PSI lines parse, averages as percents and total as microseconds."""
    path = tmp_path / "cpu"
    _put(path, "some avg10=61.50 avg60=2.00 avg300=0.10 total=123456\n"
         "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")  # fmt: skip
    psi = read_psi(path)
    assert psi["some"] == {"avg10": 61.5, "avg60": 2.0, "avg300": 0.1, "total": 123456}
    assert psi["full"]["avg10"] == 0.0


def test_psi_missing_is_empty(tmp_path: Path) -> None:
    """A kernel without PSI (psi=0, no files) gives no figures rather than an error."""
    assert read_psi(tmp_path / "absent") == {}


@pytest.fixture
def proc(tmp_path: Path) -> Path:
    proc = tmp_path / "proc"
    _put(proc / "meminfo", "MemTotal:       16384000 kB\nMemFree:  1000 kB\n"
         "MemAvailable:   8192000 kB\n")  # fmt: skip
    _put(proc / "loadavg", "1.50 1.00 0.50 3/700 999\n")
    _put(proc / "sys/kernel/pid_max", "32768\n")
    _put(proc / "pressure/cpu", "some avg10=75.00 avg60=0.00 avg300=0.00 total=1\n")
    _put(tmp_path / "sys/devices/system/cpu/online", "0-3,8-11\n")
    return proc


def test_read_host_counts_cores_memory_and_cpu_pressure(proc: Path, tmp_path: Path) -> None:
    """Online CPU ranges, MemTotal/MemAvailable and a busy CPU PSI line become the figures."""
    host = read_host(proc, tmp_path / "sys", tmp_path, lambda _p: ROOMY_DISK)
    assert host.cores == 8.0
    assert host.memory_bytes == 16384000 * 1024
    assert host.memory_available_bytes == 8192000 * 1024
    assert (host.load1, host.processes, host.pid_max) == (1.5, 700, 32768)
    assert host.cpu_pressure is True
    assert host.conditions == []


def test_missing_files_degrade_to_problems(tmp_path: Path) -> None:
    """Empty roots give a report with problems listed, never an exception."""

    def no_disk(path: Path) -> DiskStats:
        raise FileNotFoundError(2, "No such file or directory")

    host = read_host(tmp_path / "proc", tmp_path / "sys", tmp_path / "data", no_disk)
    assert host.memory_bytes == 0
    assert "cannot read meminfo" in host.problems
    assert any(p.startswith("cannot stat the data directory") for p in host.problems)


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        pytest.param(HostState(memory_available_bytes=99 * MIB, disk=ROOMY_DISK),
                     [PressureCondition.MEMORY], id="memory-below-100Mi"),
        pytest.param(HostState(memory_available_bytes=100 * MIB, disk=ROOMY_DISK), [],
                     id="memory-at-100Mi"),
        pytest.param(HostState(disk=DiskStats(1000, 99, 1000, 900)), [PressureCondition.DISK],
                     id="disk-below-10pct"),
        pytest.param(HostState(disk=DiskStats(1000, 500, 1000, 49)), [PressureCondition.DISK],
                     id="inodes-below-5pct"),
        pytest.param(HostState(processes=960, pid_max=1000), [PressureCondition.PID],
                     id="pids-below-5pct"),
        pytest.param(HostState(processes=900, pid_max=1000), [], id="pids-fine"),
    ],
)  # fmt: skip
def test_conditions_use_kubelet_thresholds(state: HostState, expected: list[str]) -> None:
    """MemoryPressure under 100Mi, DiskPressure under 10% space or 5% inodes, PIDPressure
    under 5% of pid_max."""
    assert conditions(state) == expected


def test_garbled_files_cost_one_figure(tmp_path: Path) -> None:
    """A garbled CPU list or PSI line is reported as a problem, not raised; the cores then come
    from /proc/stat, never from the inspecting host."""
    _put(tmp_path / "sys/devices/system/cpu/online", "zero-three\n")
    _put(tmp_path / "proc/pressure/cpu", "some avg10=x avg60=0.00\nfull avg10=0.00 total=0\n")
    _put(tmp_path / "proc/stat", "cpu  1 2 3\ncpu0 1 2 3\ncpu1 1 2 3\nintr 5\n")
    host = read_host(tmp_path / "proc", tmp_path / "sys", tmp_path, lambda _p: ROOMY_DISK)
    assert host.problems[0] == "cannot parse the cpu/online CPU list: 'zero-three'"
    assert (host.cores, host.cpu.source) == (2.0, "stat")
    assert host.psi["cpu"] == {"full": {"avg10": 0.0, "total": 0.0}}
    assert host.cpu_pressure is False
