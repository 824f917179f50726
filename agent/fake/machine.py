"""The fake machine description: a whole, stateful machine read from a TOML file.

The format is documented in docs/agent.md. One file describes one machine: its host (cores,
memory, pressure), its GPUs (defaults for all, overrides per index) and its RDMA ports (defaults
for all, overrides per index). The same files drive `astraeus-agent inspect --backend fake:FILE`,
the tests and the demo cluster.
"""

import re
import tomllib
import uuid
from importlib import resources
from pathlib import Path
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from astraeus.shared import Vendor
from astraeus.shared.validation import describe

DRIVE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
FabricState = Literal["not_supported", "not_started", "in_progress", "completed"]
FabricHealth = Literal["healthy", "degraded", "limited", "unhealthy"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FakeFabric(_Strict):
    """GPU fabric info as NVML reports it (multi-node NVLink domains, e.g. GB200 NVL72)."""

    cluster_uuid: uuid.UUID
    clique_id: int = Field(default=0, ge=0)
    state: FabricState = "completed"
    status_ok: bool = True
    health: FabricHealth = "healthy"


class FakeGpu(_Strict):
    """One GPU; every field may be set as a default for all GPUs or per index."""

    model: str | None = None
    memory_gb: float | None = Field(default=None, gt=0)
    pcie_gen: int = Field(default=5, ge=1, le=7)
    pcie_width: int = Field(default=16, ge=1, le=32)
    nvlinks: int = Field(default=0, ge=0, le=36)
    nvlinks_down: list[int] = Field(default_factory=list)
    fabric: FakeFabric | None = None
    xgmi_hive: str | None = None
    numa_node: int | None = None
    # Counters that grow with the fake clock, per minute:
    pcie_replays_per_min: float = Field(default=0, ge=0)
    ecc_corrected_per_min: float = Field(default=0, ge=0)
    nvlink_replays_per_min: float = Field(default=0, ge=0)
    nvlink_crc_per_min: float = Field(default=0, ge=0)
    thermal_throttle_fraction: float = Field(default=0, ge=0, le=1)
    power_throttle_fraction: float = Field(default=0, ge=0, le=1)
    nvlink5_errors_per_min: float = Field(
        default=0, ge=0, description="NVLink5 symbol errors (Blackwell counters), per minute"
    )
    # Telemetry:
    temperature_c: float = Field(default=40, ge=0)
    power_watts: float = Field(default=350, ge=0)
    utilization_percent: float = Field(default=0, ge=0, le=100)
    memory_used_gb: float = Field(default=0, ge=0)
    # States:
    nvlink5: bool = Field(default=False, description="NVLink5 field counters (Blackwell)")
    recovery_action: int = Field(
        default=0, ge=0, description="NVML_GPU_RECOVERY_ACTION_* the driver reports (field 230)"
    )
    ecc_uncorrected: int = Field(default=0, ge=0)
    remap_pending: bool = False
    remap_failure: bool = False
    retired_pages_pending: bool = False
    lost: bool = False
    fail: dict[str, str] = Field(
        default_factory=dict,
        description="NVML function name → NVMLError class it raises, e.g. NVMLError_ResetRequired",
    )
    xids: list[int] = Field(default_factory=list)
    unsupported: list[str] = Field(
        default_factory=list, description="NVML function names this driver lacks"
    )


class FakeGpus(FakeGpu):
    vendor: Vendor = Vendor.NVIDIA
    count: int = Field(default=0, ge=0, le=64)


class FakePort(_Strict):
    """One RDMA port (port 1 of its device)."""

    name: str | None = None
    link_layer: Literal["InfiniBand", "Ethernet"] = "InfiniBand"
    rate: str = "400 Gb/sec (4X NDR)"
    state: str = "4: ACTIVE"
    phys_state: str = "5: LinkUp"
    subnet_prefix: str = "fe80:0000:0000:0000"
    netdev: str | None = None
    numa_node: int | None = None


class FakeRdma(FakePort):
    count: int = Field(default=0, ge=0, le=64)
    name_format: str = "mlx5_{i}"


class FakeEthernet(_Strict):
    """The machine's management Ethernet interface (its RoCE netdevs are listed as well)."""

    name: str = "eth0"
    speed_mbps: int = Field(default=100_000, ge=1)
    state: str = "up"
    ipv4: list[str] = Field(default_factory=lambda: ["127.0.0.1"])
    ipv6: list[str] = Field(default_factory=list)


class FakePressure(_Strict):
    memory_available_mb: int = Field(default=200_000, ge=0)
    disk_total_gb: float = Field(default=1000, gt=0)
    disk_free_percent: float = Field(default=60, ge=0, le=100)
    inodes_free_percent: float = Field(default=90, ge=0, le=100)
    cpu_some_avg10: float = Field(default=0.5, ge=0, le=100)
    memory_some_avg10: float = Field(default=0, ge=0, le=100)
    io_some_avg10: float = Field(default=0, ge=0, le=100)
    processes: int = Field(default=900, ge=0)
    pid_max: int = Field(default=4_194_304, ge=1)


class FakeDrive(_Strict):
    """A drive the machine holds (or reaches over the network): a folder in its tree, with the
    capacity and free space `statvfs` answers for it."""

    capacity_gb: float = Field(default=1000, gt=0)
    free_gb: float = Field(default=500, ge=0)
    network: bool = Field(default=False, description="reached over the network, not held here")
    reachable: bool = Field(default=True, description="false: statvfs fails, as on a lost mount")

    @model_validator(mode="after")
    def _free_within_capacity(self) -> Self:
        if self.free_gb > self.capacity_gb:
            raise ValueError(f"free_gb ({self.free_gb}) is more than capacity_gb")
        return self


class FakeMachineSpec(_Strict):
    """The file's contents, validated."""

    name: str = Field(min_length=1, max_length=253)
    labels: dict[str, str] = Field(default_factory=dict)
    cores: int = Field(ge=1, le=4096)
    memory_gb: float = Field(gt=0)
    numa_nodes: int = Field(default=2, ge=1, le=64)
    imex: bool = Field(default=False, description="driver registers the IMEX channel device")
    pressure: FakePressure = Field(default_factory=FakePressure)
    ethernet: FakeEthernet = Field(default_factory=FakeEthernet)
    gpus: FakeGpus = Field(default_factory=FakeGpus)
    gpu: dict[int, dict[str, object]] = Field(default_factory=dict)
    rdma: FakeRdma = Field(default_factory=FakeRdma)
    port: dict[int, dict[str, object]] = Field(default_factory=dict)
    drives: dict[str, FakeDrive] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _overrides_in_range(self) -> Self:
        for index in self.gpu:
            if not 0 <= index < self.gpus.count:
                raise ValueError(f"gpu.{index} overrides a GPU the machine lacks")
        for index in self.port:
            if not 0 <= index < self.rdma.count:
                raise ValueError(f"port.{index} overrides a port the machine lacks")
        for name in self.drives:
            if not DRIVE_NAME.fullmatch(name):
                raise ValueError(f"drives.{name}: use letters, digits, '.', '_' and '-' only")
        return self

    def gpu_at(self, index: int) -> FakeGpu:
        """The GPU at `index`: the defaults with that index's overrides applied."""
        base = self.gpus.model_dump(exclude={"vendor", "count"}, exclude_unset=True)
        return FakeGpu.model_validate({**base, **self.gpu.get(index, {})})

    def port_at(self, index: int) -> FakePort:
        base = self.rdma.model_dump(exclude={"count", "name_format"}, exclude_unset=True)
        port = FakePort.model_validate({**base, **self.port.get(index, {})})
        if port.name is None:
            port.name = self.rdma.name_format.format(i=index)
        return port


class FakeMachineError(ValueError):
    """A fake machine file that cannot be read, with the file and the problem."""


MACHINES = "astraeus.agent.fake.machines"


def shipped_machines() -> list[str]:
    """The names of the machine files shipped in the package."""
    files = resources.files(MACHINES).iterdir()
    return sorted(f.name.removesuffix(".toml") for f in files if f.name.endswith(".toml"))


def read_spec(name_or_path: str) -> FakeMachineSpec:
    """Read a shipped machine by name (`h100-sxm`) or any file by path."""
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        label, text = str(path), _read(path)
    else:
        shipped = resources.files(MACHINES).joinpath(f"{name_or_path}.toml")
        if not shipped.is_file():
            known = ", ".join(shipped_machines())
            raise FakeMachineError(
                f"no fake machine named {name_or_path!r}; use a path or one of: {known}"
            )
        label, text = name_or_path, shipped.read_text()
    try:
        return FakeMachineSpec.model_validate(tomllib.loads(text))
    except tomllib.TOMLDecodeError as exc:
        raise FakeMachineError(f"{label}: not valid TOML: {exc}") from None
    except ValidationError as exc:
        raise FakeMachineError(f"{label}: {describe(FakeMachineSpec, exc)}") from None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise FakeMachineError(f"{path}: cannot read: {exc.strerror}") from None
