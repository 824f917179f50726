"""The machine report: GPUs with their health, NVLink domain, RDMA ports, IMEX, host figures and
pressure, from whichever backend fits. `/sys`, `/proc` and `/dev` appear here only as defaults."""

import contextlib
import logging
import os
import shutil
import socket
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from astraeus.shared import SCHEMA_VERSION, BackendStatus, GpuInfo, MachineReport, Vendor
from astraeus.shared.clock import SYSTEM_CLOCK, Clock

from .backends import GpuBackend, GpuSample
from .backends.nvml import NvmlBackend
from .backends.select import open_backend, open_fake_backend
from .drives import DriveConfig, DriveReader
from .fake import FakeMachine, load_fake_machine
from .health import HealthPolicy, HealthTracker
from .health.rdma_ports import PortHealthTracker
from .host import DiskReader, HostState, read_host, statvfs_disk
from .known_gpus import KNOWN_FILE, KnownGpus
from .settings import MachineSettings, default_state_dir
from .topology.ifaddrs import live_addresses
from .topology.imex import imex_status
from .topology.netifs import AddressReader, read_interfaces
from .topology.nvlink import machine_domain
from .topology.rdma import PortReader

log = logging.getLogger(__name__)

AGENT_VERSION = "0.1.0"
FAULTS_FILE = "gpu-faults.json"
BACKEND_VENDORS = {
    "nvml": Vendor.NVIDIA,
    "amdsmi": Vendor.AMD,
    "amdgpu": Vendor.AMD,
    "intel": Vendor.INTEL,
}
"""The vendor each real backend reads (a fake machine's is its spec's; `none` reads none)."""


@dataclass(frozen=True)
class Telemetry:
    """What the last scan read besides the report, for /metrics: each GPU's raw sample (by
    UUID), each RDMA port's counters (by `mlx5_0:1`) and the host's figures."""

    samples: dict[str, GpuSample] = field(default_factory=dict)
    port_counters: dict[str, dict[str, float]] = field(default_factory=dict)
    host: HostState = field(default_factory=HostState)


def scanner_for(settings: MachineSettings, *, read_only: bool = False) -> "Scanner":
    """The one way every command (`run`, `inspect`, `serve`) builds its scanner; `read_only`
    (`inspect`) writes nothing in the data directory."""
    local = [DriveConfig(name, Path(path)) for name, path in settings.drives]
    remote = [DriveConfig(name, Path(path), local=False) for name, path in settings.network_drives]
    return Scanner(
        name=settings.name,
        backend=settings.backend,
        sysfs_root=settings.sysfs_root,
        proc_root=settings.proc_root,
        dev_root=settings.dev_root,
        data_dir=settings.state_dir,
        labels=dict(settings.labels),
        drives=local + remote,
        policy=settings.health,
        read_only=read_only,
    )


class Scanner:
    """Builds the machine report; every root is injectable so tests read fixture trees.

    `backend` is `auto`, `nvml`, `amdsmi`, `intel`, `none`, `fake:<name or file>`, or a
    `FakeMachine`. An empty `name` means the fake machine's name, else the hostname; a name given
    with `fake:` renames the fake machine (its GPU UUIDs derive from the name). A fake
    machine writes its own sysfs/proc/dev tree under `data_dir` (unless it has one already) and
    that tree replaces the given roots. `drives` are the configured drives, read at each scan;
    a fake machine adds its own. `read_only` writes nothing in `data_dir` (what it learns of
    GPUs stays in memory; a fake machine's tree goes to a temporary directory)."""

    def __init__(
        self,
        *,
        name: str,
        backend: "str | FakeMachine" = "auto",
        sysfs_root: Path = Path("/sys"),
        proc_root: Path = Path("/proc"),
        dev_root: Path = Path("/dev"),
        data_dir: Path | None = None,
        labels: dict[str, str] | None = None,
        clock: Clock = SYSTEM_CLOCK,
        policy: HealthPolicy | None = None,
        drives: Sequence[DriveConfig] = (),
        addresses: AddressReader = live_addresses,
        read_only: bool = False,
    ) -> None:
        data_dir = data_dir or default_state_dir(os.environ)
        self.data_dir, self.clock, self.read_only = data_dir, clock, read_only
        self._scratch: Path | None = None
        """The temporary directory of a read-only scanner's fake tree, removed at close."""
        if not read_only:
            with contextlib.suppress(OSError):  # a missing disk figure is reported, not fatal
                data_dir.mkdir(parents=True, exist_ok=True)
        self.labels = dict(labels or {})
        self._disk: DiskReader = statvfs_disk
        self._addresses = addresses
        if isinstance(backend, str) and backend.startswith("fake:"):
            spec = backend.removeprefix("fake:")
            backend = load_fake_machine(spec, clock=clock, name=name or None)
        self.machine = backend if isinstance(backend, FakeMachine) else None
        self.name = name or (self.machine.name if self.machine else socket.gethostname())
        if self.machine is not None:
            if read_only and self.machine.root is None:
                self._scratch = Path(tempfile.mkdtemp(prefix="astraeus-inspect-"))
            trees = self._scratch or data_dir / "fake"
            root = self.machine.root or self.machine.write_tree(trees / self.machine.name)
            sysfs_root, proc_root, dev_root = root / "sys", root / "proc", root / "dev"
            self._disk = self.machine.disk_stats
            self._addresses = self.machine.addresses
            self.labels = {**self.machine.spec.labels, **self.labels}
            self.backend = open_fake_backend(self.machine, clock)
        else:
            self.backend = open_backend(str(backend), sysfs_root=sysfs_root, clock=clock)
        self.sysfs_root, self.proc_root, self.dev_root = sysfs_root, proc_root, dev_root
        self.drives = [DriveReader(drives)]
        if self.machine is not None and self.machine.spec.drives:
            fake = DriveReader(self.machine.drive_configs(), stat=self.machine.drive_stats)
            self.drives.append(fake)
        faults = data_dir / FAULTS_FILE
        self.tracker = HealthTracker(policy, state_file=faults, read_only=read_only)
        self.known = KnownGpus(
            data_dir / KNOWN_FILE, self.backend.name, self._vendors(), read_only=read_only
        )
        self.ports = PortHealthTracker(policy)
        self.port_reader = PortReader(sysfs_root)
        self.warnings: list[str] = []
        self.telemetry = Telemetry()

    def scan(self) -> MachineReport:
        """The full report; never raises for missing hardware."""
        now = self.clock.now()
        host = read_host(self.proc_root, self.sysfs_root, self._disk_dir(), self._disk)
        gpus, warnings, samples = self._gpus(now)
        interfaces, net_problems = read_interfaces(self.sysfs_root, self._addresses())
        ports, counters = self.port_reader.scan()
        drives = [drive for reader in self.drives for drive in reader.read()]
        problems = [problem for reader in self.drives for problem in reader.problems]
        self.warnings = host.problems + net_problems + warnings + problems
        self.telemetry = Telemetry({s.uuid: s for s in samples}, counters, host)
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
            drives=drives,
            data_free_bytes=host.disk.free_bytes if host.disk else None,
            gpus=gpus,
            gpu_backend=BackendStatus(name=self.backend.name, detail=self.backend.detail),
            rdma_ports=self.ports.classify(ports, counters, now),
            network_interfaces=interfaces,
            imex=imex_status(self.proc_root, self.dev_root),
            reported_at=now,
        )

    def refresh(self) -> None:
        """Forget the facts kept between scans as unchanging (ports' link layers, GIDs, PCI
        devices; NVML GPUs' names, bus ids and field plans): the next scan reads them afresh.
        The scanning loop calls it on a udev event; scans otherwise re-read them on a change
        they see and every 100 scans (docs/agent.md, *What a scan reads*)."""
        self.port_reader.refresh()
        if isinstance(self.backend, NvmlBackend):
            self.backend.refresh()

    def start_listening(self, wake: Callable[[], None]) -> None:
        """Hear Xid events as they happen (a thread) and call `wake` for each."""
        self.backend.start_listening(wake)

    def revalidate(self, uuid: str) -> bool:
        """An operator checked this GPU: forget its Xid faults, and stop expecting it if it is
        gone. True when there was something to forget."""
        faults = self.tracker.revalidate(uuid)
        gone = uuid not in {s.uuid for s in _sample(self.backend)} and self.known.forget(uuid)
        return faults or gone

    def close(self) -> None:
        self.backend.close()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    def _disk_dir(self) -> Path:
        """Where free disk is measured: the data directory; for a read-only scanner that did not
        create it, the nearest folder above it that exists (the file system it will be on)."""
        where = self.data_dir
        if self.read_only:
            while not where.exists() and where != where.parent:
                where = where.parent
        return where

    def _vendors(self) -> set[Vendor]:
        """The vendors whose GPUs this scanner's backend lists (for the known GPUs)."""
        if self.backend.name == "none":
            return set()
        if self.machine is not None:
            return {self.machine.spec.gpus.vendor}
        vendor = BACKEND_VENDORS.get(self.backend.name)
        return {vendor} if vendor else set()

    def _gpus(self, now: datetime) -> tuple[list[GpuInfo], list[str], list[GpuSample]]:
        samples = _sample(self.backend)
        for event in self.backend.xid_events():
            self.tracker.record_xid(event)
        domain, warning = machine_domain(samples)
        infos = [self._info(s, domain, now) for s in samples]
        # a lost GPU that never answered has a made-up UUID: not one to expect back
        self.known.remember([i for i, s in zip(infos, samples, strict=True) if not s.lost])
        present = {info.uuid for info in infos}
        for before in self.known.missing(present):
            where = before.pci_bus_id or f"index {before.index}"
            health = self.tracker.missing(before.uuid, where, now)
            infos.append(before.model_copy(update={"health": health}))
        return infos, ([warning] if warning else []) + _unavailable(samples), samples

    def _info(self, s: GpuSample, domain: str | None, now: datetime) -> GpuInfo:
        before = self.known.get(s.uuid)
        if s.lost and before is not None:  # a lost GPU cannot say what it is; we remember
            s.model, s.memory_bytes = before.model, before.memory_bytes
            s.pci_bus_id, s.numa_node = before.pci_bus_id, before.numa_node
            s.device_node = before.device_node
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
            device_node=s.device_node,
        )

    def _numa(self, bdf: str | None) -> int | None:
        if bdf is None:
            return None
        try:
            node = int((self.sysfs_root / "bus/pci/devices" / bdf / "numa_node").read_text())
        except (OSError, ValueError):
            return None
        return node if node >= 0 else None


def _unavailable(samples: list[GpuSample]) -> list[str]:
    """`nvmlDeviceGetRemappedRows: Not Supported (GPUs 0, 1)`: what the driver could not give."""
    by_problem: dict[str, list[str]] = {}
    for s in samples:
        if not s.lost:
            for problem in s.unavailable:
                by_problem.setdefault(problem, []).append(str(s.index))
    return [f"{p} (GPUs {', '.join(indexes)})" for p, indexes in by_problem.items()]


def _sample(backend: GpuBackend) -> list[GpuSample]:
    try:
        return backend.sample()
    except Exception as exc:  # a driver failing mid-scan must not take the report down
        log.warning("GPU backend %s failed to sample: %s", backend.name, exc)
        return []
