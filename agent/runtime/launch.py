"""How a worker's shim is started: a transient systemd unit, or a child in its own session.

The agent never signals a worker itself: it asks the shim, which passes SIGTERM on to every
process the worker started, and kills them all on SIGUSR1 (the agent's SIGKILL).
"""

import contextlib
import logging
import os
import resource
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from astraeus.shared import Assignment, PortSpan
from astraeus.shared.sizes import size_text

from ..environment import RDMA_CM, RDMA_DIR, WorkerEnvironment
from .state import TaskRecord, worker_name
from .users import has_capability

log = logging.getLogger(__name__)

SHIM = Path(__file__).with_name("shim.py")
Which = Callable[[str], str | None]
KILL_ALL = signal.SIGUSR1
"""What the shim takes for "kill every process of the worker now" (see shim.py)."""
RDMA_CLASSES = (f"{RDMA_CM} rw", "char-infiniband_verbs rw")
"""`/dev/infiniband` as a whole, where the chosen devices' uverbs nodes are not known."""


SHM = Path("/dev/shm")  # noqa: S108 - only its size is read, to say what a worker shares


@dataclass(frozen=True)
class Launched:
    pid: int
    pid_start: int | None
    unit: str | None = None


@dataclass(frozen=True)
class Promised:
    """What a worker without an image is owed by its launcher beyond its command (the guide:
    "GPU workers also get a larger /dev/shm and unlimited locked memory"): a private /dev/shm
    of `shm_bytes` (None: none, as for a worker without GPUs), and unlimited locked memory. A
    container gets both from its runtime (`--shm-size`, `--ulimit=memlock`), so it is owed
    nothing here."""

    shm_bytes: int | None = None
    memlock: bool = False


def promised(assignment: Assignment, worker: WorkerEnvironment) -> Promised:
    """What the launcher owes this worker: a private /dev/shm for a GPU worker, unlimited locked
    memory for a GPU or RDMA worker; nothing for a container."""
    if assignment.image is not None:
        return Promised()
    shm = worker.shm_size_bytes if assignment.assigned_gpu_ids else None
    return Promised(shm_bytes=shm, memlock=worker.memlock_unlimited)


class Launcher(Protocol):
    name: str

    def start(
        self,
        record: TaskRecord,
        spec: Path,
        log_path: Path,
        devices: tuple[str, ...] = (),
        rendezvous_ports: PortSpan | None = None,
        owed: Promised = Promised(),
    ) -> Launched:
        """Start the shim; when the launcher cannot give what is `owed`, the first line of the
        worker's log says what it lacks (`shortfall`)."""
        ...

    def shortfall(self, owed: Promised) -> str | None: ...

    def gives(self) -> str: ...

    def signal(self, record: TaskRecord, sig: signal.Signals) -> None: ...

    def alive(self, record: TaskRecord) -> bool: ...

    def reap(self) -> None: ...


def shim_command(spec: Path) -> list[str]:
    """The shim runs isolated from the user's site-packages and PYTHON* variables. In a release
    build (one frozen program, no interpreter) the program runs it as a module instead."""
    if getattr(sys, "frozen", False):
        return [sys.executable, "-m", "astraeus.agent.runtime.shim", str(spec)]
    return [sys.executable, "-I", str(SHIM), str(spec)]


def shim_signal(sig: signal.Signals) -> signal.Signals:
    """The signal the shim gets for `sig`: SIGKILL would end the shim, not the worker's tree."""
    return KILL_ALL if sig == signal.SIGKILL else sig


class ProcessLauncher:
    """Shims as child processes in their own session, so they outlive the agent. The devices
    and the rendezvous range are not enforced in this mode (docs/security.md)."""

    name = "process"

    def __init__(self, why: str = "") -> None:
        self.why = why
        """Why workers are plain processes here (`PID 1 is tini, not systemd`)."""
        self._children: dict[int, subprocess.Popen[bytes]] = {}

    def start(
        self,
        record: TaskRecord,
        spec: Path,
        log_path: Path,
        devices: tuple[str, ...] = (),
        rendezvous_ports: PortSpan | None = None,
        owed: Promised = Promised(),
    ) -> Launched:
        note_shortfall(log_path, self.shortfall(owed))
        with open(log_path, "ab") as out:
            child = subprocess.Popen(  # noqa: S603 - our own shim
                shim_command(spec),
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                env=_shim_env(),
            )
        self._children[child.pid] = child
        return Launched(pid=child.pid, pid_start=proc_start_time(child.pid))

    def signal(self, record: TaskRecord, sig: signal.Signals) -> None:
        if record.pid is None or not self.alive(record):
            return
        with contextlib.suppress(ProcessLookupError):  # it ended between check and signal
            os.kill(record.pid, shim_signal(sig))

    def alive(self, record: TaskRecord) -> bool:
        if record.pid is None:
            return False
        child = self._children.get(record.pid)
        if child is not None:
            if child.poll() is None:  # also reaps it
                return True
            del self._children[record.pid]
            return False
        return proc_alive(record.pid, record.pid_start)

    def reap(self) -> None:
        """Collect the exit of every shim that ended, so none stays a zombie of the agent."""
        for pid, child in list(self._children.items()):
            if child.poll() is not None:
                del self._children[pid]

    def shortfall(self, owed: Promised) -> str | None:
        """A plain process shares the machine's /dev/shm (no mount namespace of its own), and
        its locked memory goes no further than the agent may raise it."""
        lacks = []
        if owed.shm_bytes is not None:
            lacks.append(f"no private /dev/shm of {size_text(owed.shm_bytes)}: {machine_shm()}")
        limit = memlock_limit()
        if owed.memlock and limit is not None:
            lacks.append(
                f"locked memory only up to {size_text(limit)} (unlimited needs CAP_SYS_RESOURCE)"
            )
        if not lacks:
            return None
        why = f" ({self.why})" if self.why else ""
        return f"astraeus: this worker runs as a plain process{why}: {'; '.join(lacks)}"

    def gives(self) -> str:
        """What GPU workers get here, for `inspect` and the agent's log."""
        why = f" ({self.why})" if self.why else ""
        limit = memlock_limit()
        locked = "unlimited" if limit is None else f"up to {size_text(limit)}"
        return (
            f"plain processes{why}: the machine's /dev/shm{shm_size()}, shared, not a private "
            f"one; locked memory {locked}; containers (runs with an image) get both"
        )


TEMPORARY_FS_SINCE = 238
PROTECT_PROC_SINCE = 247
SOCKET_BIND_SINCE = 249
"""The systemd versions that know `TemporaryFileSystem=` (a private /dev/shm), `ProtectProc=`
and `SocketBindAllow=`/`SocketBindDeny=`: an older one refuses the unit, so the agent leaves
them out there (and says so at start, and in the worker's log for what a worker is owed)."""


class SystemdLauncher:
    """Shims in transient units, so the agent's own unit can restart without killing them."""

    name = "systemd"

    def __init__(self, version: int | None = None) -> None:
        self.version = systemd_version() if version is None else version

    def start(
        self,
        record: TaskRecord,
        spec: Path,
        log_path: Path,
        devices: tuple[str, ...] = (),
        rendezvous_ports: PortSpan | None = None,
        owed: Promised = Promised(),
    ) -> Launched:
        unit = worker_name(record.assignment)
        note_shortfall(log_path, self.shortfall(owed))
        command = systemd_run_command(
            unit,
            record.assignment,
            shim_command(spec),
            devices,
            rendezvous_ports,
            self.version,
            shm_bytes=owed.shm_bytes,
        )
        subprocess.run(command, check=True, capture_output=True, env=_shim_env())  # noqa: S603
        shown = subprocess.run(  # noqa: S603
            ["systemctl", "show", "--property=MainPID", "--value", unit],  # noqa: S607
            check=True,
            capture_output=True,
            text=True,
        )
        pid = int(shown.stdout.strip() or 0)
        return Launched(pid=pid, pid_start=proc_start_time(pid), unit=unit)

    def signal(self, record: TaskRecord, sig: signal.Signals) -> None:
        if record.unit:
            subprocess.run(  # noqa: S603 - best effort: the unit may be gone already
                systemctl_kill_command(record.unit, sig),
                check=False,
                capture_output=True,
            )

    def alive(self, record: TaskRecord) -> bool:
        return record.pid is not None and proc_alive(record.pid, record.pid_start)

    def reap(self) -> None:
        """systemd is the shims' parent: nothing to collect here."""

    def shortfall(self, owed: Promised) -> str | None:
        """Locked memory is always unlimited (`LimitMEMLOCK=infinity`); a private /dev/shm
        needs `TemporaryFileSystem=`."""
        if owed.shm_bytes is None or self.version >= TEMPORARY_FS_SINCE:
            return None
        return (
            f"astraeus: this worker's systemd unit has no private /dev/shm of "
            f"{size_text(owed.shm_bytes)} (systemd {self.version} is older than "
            f"{TEMPORARY_FS_SINCE}, which knows TemporaryFileSystem=): {machine_shm()}"
        )

    def gives(self) -> str:
        """What GPU workers get here, for `inspect` and the agent's log."""
        if self.version >= TEMPORARY_FS_SINCE:
            shm = "a private /dev/shm of half the task's memory (at least 1 GiB)"
        else:
            shm = (
                f"the machine's /dev/shm{shm_size()}, shared, not a private one (systemd "
                f"{self.version} is older than {TEMPORARY_FS_SINCE})"
            )
        return f"systemd units (systemd {self.version}): {shm}; locked memory unlimited"


def systemctl_kill_command(unit: str, sig: signal.Signals) -> list[str]:
    """To the unit's main process, the shim, which passes it on (`--kill-who`: systemd < 252
    knows no `--kill-whom`, later ones keep the old name)."""
    return ["systemctl", "kill", "--kill-who=main", f"--signal={shim_signal(sig).name}", unit]


def systemd_run_command(
    unit: str,
    assignment: Assignment,
    command: list[str],
    devices: tuple[str, ...] = (),
    rendezvous_ports: PortSpan | None = None,
    version: int = SOCKET_BIND_SINCE,
    *,
    shm_bytes: int | None = None,
) -> list[str]:
    """`systemd-run` for one worker: its own unit and cgroup, unlimited locked memory, the
    task's limits, a private /tmp, a private /dev/shm of `shm_bytes` (a GPU worker's), no
    device but the pseudo-devices and its own, no other user's processes in its /proc, and no
    port of the rendezvous range but its run's own."""
    properties = ["LimitMEMLOCK=infinity", "KillMode=control-group", "PrivateTmp=yes"]
    if shm_bytes is not None and version >= TEMPORARY_FS_SINCE:
        # A tmpfs in the unit's mount namespace, sticky and world-writable as /dev/shm is (the
        # worker runs as its own user), charged to the unit's memory like any shared memory.
        properties.append(f"TemporaryFileSystem=/dev/shm:size={shm_bytes},mode=1777,nosuid,nodev")
    if version >= PROTECT_PROC_SINCE:
        properties.append("ProtectProc=invisible")
    if version >= SOCKET_BIND_SINCE:
        properties += socket_bind_fence(assignment, rendezvous_ports)
    if assignment.cpu_cores:
        properties.append(f"CPUQuota={round(assignment.cpu_cores * 100)}%")
    if assignment.memory_bytes:
        properties.append(f"MemoryMax={assignment.memory_bytes}")
    properties.append("DevicePolicy=closed")
    properties += [f"DeviceAllow={allowed}" for allowed in device_allow(devices)]
    return [
        "systemd-run",
        f"--unit={unit}",
        f"--description=Astraeus task {assignment.task}",
        "--collect",
        "--quiet",
        *(f"--property={p}" for p in properties),
        "--",
        *command,
    ]


def socket_bind_fence(assignment: Assignment, rendezvous_ports: PortSpan | None) -> list[str]:
    """`SocketBindDeny=` the rendezvous range, and `SocketBindAllow=` the run's own port in it
    (worker 0's `MASTER_PORT`, for every worker of the run: torchrun tries to host the store on
    any worker of worker 0's machine). An allow entry wins over a deny one
    (systemd.resource-control(5)); both are cgroup/bind4 and bind6 hooks, for TCP and UDP."""
    if rendezvous_ports is None:
        return []
    fence = [f"SocketBindDeny={rendezvous_ports.first}-{rendezvous_ports.last}"]
    own = assignment.rendezvous.master_port
    if own is not None and own in rendezvous_ports:
        fence.insert(0, f"SocketBindAllow={own}")
    return fence


def systemd_version(run: Callable[..., "subprocess.CompletedProcess[str]"] = subprocess.run) -> int:
    """The number in `systemctl --version`'s first line (`systemd 252 (252.22-1)`); 0 when
    it cannot be read."""
    try:
        shown = run(["systemctl", "--version"], capture_output=True, text=True, check=False)
        return int(shown.stdout.split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def device_allow(devices: tuple[str, ...]) -> list[str]:
    """`DeviceAllow=` values: each device node read-write; `/dev/infiniband` by its classes."""
    allowed: list[str] = []
    for device in devices:
        allowed += RDMA_CLASSES if device == RDMA_DIR else [f"{device} rw"]
    return list(dict.fromkeys(allowed))


def launch_mode(*, pid1: str | None = None, which: Which = shutil.which) -> str | None:
    """None where workers run in systemd units (systemd is PID 1 and systemd-run is there),
    else why they run as plain processes."""
    pid1 = _pid1_name() if pid1 is None else pid1
    if pid1 == "systemd" and which("systemd-run"):
        return None
    return "systemd-run not found" if pid1 == "systemd" else f"PID 1 is {pid1}, not systemd"


def choose_launcher(*, pid1: str | None = None, which: Which = shutil.which) -> Launcher:
    """systemd-run when systemd is PID 1 and the tool is there, else child processes."""
    reason = launch_mode(pid1=pid1, which=which)
    if reason is None:
        log.info("workers run in transient systemd units (systemd-run); agent restarts keep them")
        launcher = SystemdLauncher()
        if launcher.version < SOCKET_BIND_SINCE:
            log.warning(
                "systemd %d is older than %d: workers get no SocketBindDeny= for the rendezvous"
                " range%s%s",
                launcher.version,
                SOCKET_BIND_SINCE,
                "" if launcher.version >= PROTECT_PROC_SINCE else " and no ProtectProc=invisible",
                "" if launcher.version >= TEMPORARY_FS_SINCE else " nor a private /dev/shm",
            )
        log.info("GPU workers get: %s", launcher.gives())
        return launcher
    log.info("workers run as child processes in their own session (%s); %s", reason, memlock())
    process = ProcessLauncher(reason)
    log.info("GPU workers get: %s", process.gives())
    return process


def inspect_launcher(*, pid1: str | None = None, which: Which = shutil.which) -> Launcher:
    """The launcher the agent would choose here, chosen without a word in the log (`inspect`)."""
    reason = launch_mode(pid1=pid1, which=which)
    return SystemdLauncher() if reason is None else ProcessLauncher(reason)


CAP_SYS_RESOURCE = 24


def memlock_limit(status: Path = Path("/proc/self/status")) -> int | None:
    """How far a worker's locked memory can be raised from here: None for unlimited (no hard
    limit, or CAP_SYS_RESOURCE to lift it), else the hard limit in bytes."""
    _, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if hard == resource.RLIM_INFINITY or has_capability(status, CAP_SYS_RESOURCE):
        return None
    return hard


def memlock(status: Path = Path("/proc/self/status")) -> str:
    """How far a worker's locked-memory limit can be raised from here, in words for the log."""
    hard = memlock_limit(status)
    if hard is None:
        return "locked memory: unlimited"
    return (
        f"locked memory: raised to the hard limit {hard} bytes (unlimited needs CAP_SYS_RESOURCE)"
    )


def shm_size(shm: Path = SHM) -> str:
    """` (31.2 GiB)`: the machine's /dev/shm's size, or nothing where it cannot be read."""
    try:
        st = os.statvfs(shm)
    except OSError:
        return ""
    return f" ({size_text(st.f_blocks * st.f_frsize)})"


def machine_shm(shm: Path = SHM) -> str:
    """`its /dev/shm is the machine's (31.2 GiB), shared with every process here`."""
    return f"its /dev/shm is the machine's{shm_size(shm)}, shared with every process here"


def note_shortfall(log_path: Path, note: str | None) -> None:
    """The note, one line at the top of the worker's log (before anything the worker writes)."""
    if note:
        with log_path.open("a", encoding="utf-8") as out:
            out.write(note + "\n")


def proc_start_time(pid: int, proc: Path = Path("/proc")) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    fields = _stat_fields(pid, proc)
    return int(fields[19]) if fields else None


def proc_alive(pid: int, start: int | None, proc: Path = Path("/proc")) -> bool:
    """True while `pid` runs and is the process we started (not a zombie, not a reused pid)."""
    fields = _stat_fields(pid, proc)
    if not fields or fields[0] in ("Z", "X"):
        return False
    return start is None or int(fields[19]) == start


def _stat_fields(pid: int, proc: Path) -> list[str] | None:
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat[stat.rindex(")") + 2 :].split()  # the name may hold spaces and parentheses


def _pid1_name() -> str:
    try:
        return Path("/proc/1/comm").read_text().strip()
    except OSError:
        return "unknown"


def _shim_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ")}
