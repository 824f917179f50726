"""How many cores this machine can give to work: the online CPUs, read from the roots given
(`<sysfs>/devices/system/cpu/online`, else the `cpuN` lines of `<proc>/stat`, else the
`processor` lines of `<proc>/cpuinfo`; never the inspecting host's own count), capped by the CPU
quota of the cgroup the agent runs in and of every cgroup above it."""

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

_STAT_CPU = re.compile(r"^cpu\d+\s", re.M)
_PROCESSOR = re.compile(r"^processor\s*:", re.M)


@dataclass
class Cores:
    online: float = 0.0
    """CPUs online, from the first source that answers."""
    quota: float | None = None
    """The tightest cgroup CPU quota in cores (`cpu.max` 150000/100000 → 1.5), if any."""
    source: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def allocatable(self) -> float:
        return min(self.online, self.quota) if self.quota is not None else self.online


def read_cores(proc_root: Path, sysfs_root: Path) -> Cores:
    cores = Cores()
    counters: tuple[tuple[str, Callable[[], int]], ...] = (
        ("cpu/online", lambda: _online_list(sysfs_root / "devices/system/cpu/online")),
        ("stat", lambda: len(_STAT_CPU.findall((proc_root / "stat").read_text()))),
        ("cpuinfo", lambda: len(_PROCESSOR.findall((proc_root / "cpuinfo").read_text()))),
    )
    for source, count in counters:
        try:
            found = count()
        except OSError:
            continue
        except ValueError as exc:
            cores.problems.append(f"cannot parse the {source} CPU list: {exc}")
            continue
        if found > 0:
            cores.online, cores.source = float(found), source
            break
    else:
        cores.problems.append("cannot count the CPUs: no cpu/online, /proc/stat or cpuinfo")
    cores.quota = cgroup_quota(proc_root, sysfs_root)
    return cores


def _online_list(path: Path) -> int:
    """`0-3,8-11` → 8."""
    text = path.read_text().strip()
    count = 0
    try:
        for part in text.split(","):
            low, _, high = part.partition("-")
            count += int(high or low) - int(low) + 1
    except ValueError:
        raise ValueError(repr(text)) from None
    return count


def cgroup_quota(proc_root: Path, sysfs_root: Path) -> float | None:
    """The smallest CPU quota, in cores, of the agent's cgroup and its ancestors (v2 `cpu.max`,
    v1 `cpu.cfs_quota_us`/`cpu.cfs_period_us`). A systemd service's own unit is skipped: its
    workers run in their own units, so the agent unit's CPUQuota= limits the agent alone."""
    try:
        lines = (proc_root / "self/cgroup").read_text().splitlines()
    except OSError:
        return None
    quotas = []
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, sep, path = rest.partition(":")
        if not sep:
            continue
        if hierarchy == "0" and controllers == "":
            quotas += _walk(sysfs_root / "fs/cgroup", path, _v2)
        elif "cpu" in controllers.split(","):
            quotas += _walk(sysfs_root / "fs/cgroup" / controllers, path, _v1)
    return min(quotas) if quotas else None


def _walk(mount: Path, path: str, read: Callable[[Path], float | None]) -> list[float]:
    parts = [p for p in path.strip().split("/") if p]
    if parts and parts[-1].endswith(".service"):
        parts = parts[:-1]
    found = []
    for depth in range(len(parts) + 1):
        quota = read(mount.joinpath(*parts[:depth]))
        if quota is not None:
            found.append(quota)
    return found


def _v2(directory: Path) -> float | None:
    try:
        quota, period = (directory / "cpu.max").read_text().split()
        return None if quota == "max" else _cores(int(quota), int(period))
    except (OSError, ValueError):
        return None


def _v1(directory: Path) -> float | None:
    try:
        quota = int((directory / "cpu.cfs_quota_us").read_text())
        period = int((directory / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None if quota < 0 else _cores(quota, period)


def _cores(quota: int, period: int) -> float | None:
    """Hundredths of a core, rounded up: 150000/100000 → 1.5."""
    return math.ceil(quota * 100 / period) / 100 if period > 0 and quota > 0 else None
