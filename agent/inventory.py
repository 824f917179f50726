"""The machine report: GPUs with their health, NVLink domain, RDMA ports, IMEX, host figures and
pressure, from whichever backend fits. `/sys`, `/proc` and `/dev` appear here only as defaults."""

import contextlib
import logging
import socket
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from astraeus.shared import SCHEMA_VERSION, BackendStatus, GpuInfo, MachineReport

from .backends import GpuBackend, GpuSample
from .backends.select import open_backend, open_fake_backend
from .fake import FakeMachine, load_fake_machine
from .health import HealthPolicy, HealthTracker
from .host import DiskReader, read_host, statvfs_disk
from .topology.imex import imex_status
from .topology.nvlink import machine_domain
from .topology.rdma import read_ports

log = logging.getLogger(__name__)

AGENT_VERSION = "0.1.0"
FAULTS_FILE = "gpu-faults.json"


def utc_now() -> datetime:
    return datetime.now(UTC)


class Scanner:
    """Builds the machine report; every root is injectable so tests read fixture trees.

    `backend` is `auto`, `nvml`, `amdsmi`, `intel`, `none`, `fake:<name or file>`, or a
    `FakeMachine`. An empty `name` means the fake machine's name, else the hostname. A fake
    machine writes its own sysfs/proc/dev tree under `data_dir` (unless it has one already) and
    that tree replaces the given roots."""

    def __init__(
        self,
        *,
        name: str,
        backend: "str | FakeMachine" = "auto",
        sysfs_root: Path = Path("/sys"),
        proc_root: Path = Path("/proc"),
        dev_root: Path = Path("/dev"),
        data_dir: Path,
        labels: dict[str, str] | None = None,
        clock: Callable[[], datetime] = utc_now,
        policy: HealthPolicy | None = None,
    ) -> None:
        self.data_dir, self.clock = data_dir, clock
        with contextlib.suppress(OSError):  # a missing disk figure is reported, not fatal
            data_dir.mkdir(parents=True, exist_ok=True)
        self.labels = dict(labels or {})
        self._disk: DiskReader = statvfs_disk
        if isinstance(backend, str) and backend.startswith("fake:"):
            backend = load_fake_machine(backend.removeprefix("fake:"), clock=clock)
        self.machine = backend if isinstance(backend, FakeMachine) else None
        self.name = name or (self.machine.name if self.machine else socket.gethostname())
        if self.machine is not None:
            root = self.machine.root or self.machine.write_tree(
                data_dir / "fake" / self.machine.name
            )
            sysfs_root, proc_root, dev_root = root / "sys", root / "proc", root / "dev"
            self._disk = self.machine.disk_stats
            self.labels = {**self.machine.spec.labels, **self.labels}
            self.backend = open_fake_backend(self.machine, clock)
        else:
            self.backend = open_backend(str(backend), sysfs_root=sysfs_root, clock=clock)
        self.sysfs_root, self.proc_root, self.dev_root = sysfs_root, proc_root, dev_root
        self.tracker = HealthTracker(policy, state_file=data_dir / FAULTS_FILE)
        self._seen: dict[str, GpuInfo] = {}
        self.warnings: list[str] = []

    def scan(self) -> MachineReport:
        """The full report; never raises for missing hardware."""
        now = self.clock()
        host = read_host(self.proc_root, self.sysfs_root, self.data_dir, self._disk)
        gpus, warnings = self._gpus(now)
        self.warnings = host.problems + warnings
        return MachineReport(
            schema_version=SCHEMA_VERSION,
            name=self.name,
            hostname=socket.gethostname() if self.machine is None else self.machine.name,
            agent_version=AGENT_VERSION,
            labels=self.labels,
            cpu_cores=host.cores,
            memory_bytes=host.memory_bytes,
            free_cpu_cores=max(0.0, host.cores - host.load1) if host.load1 is not None else None,
            free_memory_bytes=host.memory_available_bytes,
            conditions=host.conditions,
            cpu_pressure=host.cpu_pressure,
            data_free_bytes=host.disk.free_bytes if host.disk else None,
            gpus=gpus,
            gpu_backend=BackendStatus(name=self.backend.name, detail=self.backend.detail),
            rdma_ports=read_ports(self.sysfs_root),
            imex=imex_status(self.proc_root, self.dev_root),
            reported_at=now,
        )

    def start_listening(self, wake: Callable[[], None]) -> None:
        """Hear Xid events as they happen (a thread) and call `wake` for each."""
        self.backend.start_listening(wake)

    def close(self) -> None:
        self.backend.close()

    def _gpus(self, now: datetime) -> tuple[list[GpuInfo], list[str]]:
        samples = _sample(self.backend)
        for event in self.backend.xid_events():
            self.tracker.record_xid(event)
        domain, warning = machine_domain(samples)
        infos = [self._info(s, domain, now) for s in samples]
        present = {info.uuid for info in infos}
        for uuid, before in self._seen.items():
            if uuid not in present:
                where = before.pci_bus_id or f"index {before.index}"
                health = self.tracker.missing(uuid, where, now)
                infos.append(before.model_copy(update={"health": health}))
        self._seen.update({info.uuid: info for info in infos})
        return infos, [warning] if warning else []

    def _info(self, s: GpuSample, domain: str | None, now: datetime) -> GpuInfo:
        before = self._seen.get(s.uuid)
        if s.lost and before is not None:  # a lost GPU cannot say what it is; we remember
            s.model, s.memory_bytes = before.model, before.memory_bytes
            s.pci_bus_id, s.numa_node = before.pci_bus_id, before.numa_node
        return GpuInfo(
            index=s.index,
            uuid=s.uuid,
            vendor=s.vendor,
            model=s.model,
            memory_bytes=s.memory_bytes,
            pci_bus_id=s.pci_bus_id,
            numa_node=s.numa_node if s.numa_node is not None else self._numa(s.pci_bus_id),
            health=self.tracker.update(s, now),
            nvlink_domain=domain,
            xgmi_hive=s.xgmi_hive,
        )

    def _numa(self, bdf: str | None) -> int | None:
        if bdf is None:
            return None
        try:
            node = int((self.sysfs_root / "bus/pci/devices" / bdf / "numa_node").read_text())
        except (OSError, ValueError):
            return None
        return node if node >= 0 else None


def _sample(backend: GpuBackend) -> list[GpuSample]:
    try:
        return backend.sample()
    except Exception as exc:  # a driver failing mid-scan must not take the report down
        log.warning("GPU backend %s failed to sample: %s", backend.name, exc)
        return []
