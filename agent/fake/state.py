"""A fake machine while it runs: its description plus what happened to it since (lost GPUs,
Xids, ports going down). Counters grow with the clock it is given."""

import errno
import logging
import os
from collections.abc import Callable
from functools import cache
from pathlib import Path

from astraeus.agent.drives import DriveConfig
from astraeus.agent.host import DiskStats
from astraeus.agent.topology.ifaddrs import AddressBook, Addresses
from astraeus.shared.clock import SYSTEM_CLOCK, Clock
from astraeus.shared.fake_gpu import gpu_uuid

from .machine import FakeGpu, FakeMachineSpec, FakePort
from .tree import fake_mac, write_tree

# A DGX H100's GPU and NIC buses; more GPUs than that get made-up ones.
log = logging.getLogger(__name__)

XID_LOG = "xids"
"""A running fake machine's Xid log in its tree (`read_xid_log`)."""

_GPU_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
_NIC_BUSES = (0x17, 0x29, 0x39, 0x5C, 0x99, 0xAA, 0xB9, 0xDA)


class FakeMachine:
    """A whole, stateful fake machine built from a `FakeMachineSpec`."""

    def __init__(
        self, spec: FakeMachineSpec, *, clock: Clock = SYSTEM_CLOCK, name: str | None = None
    ) -> None:
        self.spec = spec.model_copy(update={"name": name}) if name else spec
        self.clock = clock
        self.started = clock.now()
        self.root: Path | None = None
        self.on_xid: Callable[[int, int], None] | None = None
        self._removed: set[int] = set()
        self._lost: set[int] = set()
        self._unreachable: set[str] = set()
        self._gpu = cache(self._build_gpu)
        self._xids_read = 0

    @property
    def name(self) -> str:
        return self.spec.name

    # --- what the fakes read
    def elapsed_seconds(self) -> float:
        return max(0.0, (self.clock.now() - self.started).total_seconds())

    def present_gpus(self) -> list[int]:
        return [i for i in range(self.spec.gpus.count) if i not in self._removed]

    def spec_gpu(self, index: int) -> FakeGpu:
        return self._gpu(index)

    def gpu_uuid(self, index: int) -> str:
        return gpu_uuid(self.spec.name, index)

    def gpu_bus(self, index: int) -> int:
        return _GPU_BUSES[index] if index < len(_GPU_BUSES) else 0x100 - 2 * (index + 1)

    def nic_bus(self, index: int) -> int:
        return _NIC_BUSES[index] if index < len(_NIC_BUSES) else 0x60 + index

    def gpu_numa(self, index: int) -> int:
        return index * self.spec.numa_nodes // max(1, self.spec.gpus.count)

    def nic_numa(self, index: int) -> int:
        return index * self.spec.numa_nodes // max(1, self.spec.rdma.count)

    def port(self, index: int) -> FakePort:
        return self.spec.port_at(index)

    def disk_stats(self, _path: Path) -> DiskStats:
        """What `statvfs` would say about the data directory."""
        p = self.spec.pressure
        total = int(p.disk_total_gb * 1024**3)
        files = 64_000_000
        return DiskStats(
            total_bytes=total,
            free_bytes=int(total * p.disk_free_percent / 100),
            total_inodes=files,
            free_inodes=int(files * p.inodes_free_percent / 100),
        )

    def drive_configs(self) -> list[DriveConfig]:
        """The machine's drives as an agent would be configured: folders under its tree."""
        if self.root is None:
            raise RuntimeError("write_tree() first: drives are folders in the tree")
        found = []
        for name, drive in sorted(self.spec.drives.items()):
            folder = self.root / "drives" / name
            folder.mkdir(parents=True, exist_ok=True)  # a tree written before drives were added
            found.append(DriveConfig(name, folder, local=not drive.network))
        return found

    def drive_stats(self, path: Path) -> DiskStats:
        """What `statvfs` says about a drive's folder; OSError when it is unreachable."""
        drive = self.spec.drives[path.name]
        if path.name in self._unreachable or not drive.reachable:
            raise OSError(errno.ENOTCONN, os.strerror(errno.ENOTCONN), str(path))
        files = 64_000_000
        return DiskStats(
            total_bytes=int(drive.capacity_gb * 1024**3),
            free_bytes=int(drive.free_gb * 1024**3),
            total_inodes=files,
            free_inodes=files // 2,
        )

    def addresses(self) -> AddressBook:
        """What getifaddrs would say: the management interface's configured addresses."""
        eth = self.spec.ethernet
        return {eth.name: Addresses(2, fake_mac(2), list(eth.ipv4), list(eth.ipv6))}

    # --- what tests and the demo do to it
    def lose_drive(self, name: str) -> None:
        """Drive `name` stops answering, as a network mount does when its server goes."""
        self._unreachable.add(name)

    def write_tree(self, root: Path) -> Path:
        """Write the machine's /sys, /proc and /dev under `root`; return `root`."""
        write_tree(self, root)
        self.root = root
        return root

    def inject_xid(self, index: int, xid: int) -> None:
        """The driver reports Xid `xid` on GPU `index`."""
        if self.on_xid is not None:
            self.on_xid(index, xid)

    def read_xid_log(self) -> None:
        """Deliver each new line `<GPU index> <xid>` of the file `xids` in the machine's tree,
        as the driver reports an Xid: how a test injects one into an agent running as a process
        of its own. A line that is not two whole numbers is skipped, with a warning."""
        if self.root is None:
            return
        try:
            lines = (self.root / XID_LOG).read_text().splitlines()
        except FileNotFoundError:
            return
        for line in lines[self._xids_read :]:
            parts = line.split()
            if len(parts) != 2 or not all(part.isdigit() for part in parts):
                log.warning(
                    "fake machine %s: %s: not `<index> <xid>`: %r", self.name, XID_LOG, line
                )
                continue
            self.inject_xid(int(parts[0]), int(parts[1]))
        self._xids_read = len(lines)

    def lose_gpu(self, index: int) -> None:
        """GPU `index` falls off the bus: every query answers `GPU is lost`."""
        self._lost.add(index)
        self._gpu.cache_clear()

    def remove_gpu(self, index: int) -> None:
        """GPU `index` disappears from the driver's list altogether."""
        self._removed.add(index)

    def restore_gpu(self, index: int) -> None:
        """GPU `index` is listed again (re-seated, or the driver reloaded), whole."""
        self._removed.discard(index)
        self._lost.discard(index)
        self._gpu.cache_clear()

    def set_port_state(self, index: int, state: str, phys_state: str) -> None:
        """Rewrite port `index`'s sysfs state files, e.g. `1: DOWN`, `2: Polling`."""
        port_dir = self._port_dir(index)
        (port_dir / "state").write_text(state + "\n")
        (port_dir / "phys_state").write_text(phys_state + "\n")

    def add_port_errors(self, index: int, counter: str, count: int) -> None:
        """Port `index`'s error counter `counter` (e.g. `symbol_error`) grows by `count`."""
        path = self._port_dir(index) / "counters" / counter
        path.write_text(f"{int(path.read_text()) + count}\n")

    def _port_dir(self, index: int) -> Path:
        if self.root is None:
            raise RuntimeError("write_tree() first: the port lives in the sysfs tree")
        return self.root / "sys/class/infiniband" / str(self.port(index).name) / "ports/1"

    def _build_gpu(self, index: int) -> FakeGpu:
        gpu = self.spec.gpu_at(index)
        if index in self._lost:
            gpu.lost = True
        return gpu
