"""The machine's drives, from the agent's configuration: local drives and network drives it can
reach. Each scan reads every drive's capacity and free space with `statvfs`; a drive whose path
is missing, is not a directory, or does not answer within a few seconds (a hung network mount)
is reported unreachable, so placement keeps runs that mount it away from this machine."""

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from astraeus.shared import DriveInfo

from .host import DiskStats, statvfs_disk

STAT_TIMEOUT_SECONDS = 3.0
"""How long a scan waits for one drive's `statvfs`: a hung NFS mount can block forever."""

Stat = Callable[[Path], DiskStats]


@dataclass(frozen=True)
class DriveConfig:
    """One drive as configured: its name (what runs ask for), its path here, local or not."""

    name: str
    path: Path
    local: bool = True


@dataclass
class _Probe:
    """One `statvfs` in a daemon thread: a probe that never returns never blocks the agent."""

    path: Path
    stat: Stat
    done: threading.Event = field(default_factory=threading.Event)
    stats: DiskStats | None = None
    error: str = ""

    def start(self) -> "_Probe":
        name = f"statvfs {self.path}"
        threading.Thread(target=self._run, name=name, daemon=True).start()
        return self

    def _run(self) -> None:
        try:
            if not self.path.is_dir():
                self.error = "not a directory" if self.path.exists() else "no such directory"
            else:
                self.stats = self.stat(self.path)
        except OSError as exc:
            self.error = exc.strerror or str(exc)
        finally:
            self.done.set()


class DriveReader:
    """Reads every configured drive at each scan; `problems` says why any is unreachable."""

    def __init__(
        self,
        drives: Sequence[DriveConfig],
        stat: Stat = statvfs_disk,
        timeout: float = STAT_TIMEOUT_SECONDS,
    ) -> None:
        self.drives, self._stat, self._timeout = tuple(drives), stat, timeout
        self._stuck: dict[Path, _Probe] = {}
        self.problems: list[str] = []

    def read(self) -> list[DriveInfo]:
        self.problems = []
        return [self._one(drive) for drive in self.drives]

    def _one(self, drive: DriveConfig) -> DriveInfo:
        probe = self._stuck.get(drive.path)
        if probe is not None:  # stuck at an earlier scan: wait for it, never start another
            probe.done.wait(self._timeout)
            why = probe.error or f"statvfs has not answered for {self._timeout:g} s or more"
        else:
            probe = _Probe(drive.path, self._stat).start()
            probe.done.wait(self._timeout)
            why = probe.error if probe.done.is_set() else f"no answer in {self._timeout:g} s"
        if probe.done.is_set():
            self._stuck.pop(drive.path, None)
        else:
            self._stuck[drive.path] = probe
        if probe.stats is not None:
            return DriveInfo(
                name=drive.name,
                path=str(drive.path),
                capacity_bytes=probe.stats.total_bytes,
                free_bytes=probe.stats.free_bytes,
                local=drive.local,
            )
        kind = "drive" if drive.local else "network drive"
        self.problems.append(f"{kind} {drive.name} at {drive.path} is not reachable: {why}")
        return DriveInfo(name=drive.name, path=str(drive.path), local=drive.local, reachable=False)
