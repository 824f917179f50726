"""The machine report an agent PUTs to the coordinator every few seconds."""

import ipaddress
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Final

from pydantic import Field, StringConstraints, field_serializer, field_validator

from .base import INT64_MAX, WireModel
from .choices import Vendor

SCHEMA_VERSION = "1.0"
"""`MAJOR.MINOR`. A reader accepts any minor of its own major (new fields are ignored) and rejects
a missing version or another major."""

SCHEMA_MAJOR = int(SCHEMA_VERSION.split(".", 1)[0])

# The most a report may list: far above any real machine, low enough that one report costs the
# coordinator milliseconds (a 50,000-GPU report held its event loop for a second).
MAX_GPUS: Final = 256
"""A 16-GPU HGX-2 with each GPU cut into 7 MIG instances is 112."""
MAX_RDMA_PORTS: Final = 1024
"""Ports with SR-IOV virtual functions included."""
MAX_DRIVES: Final = 1024
MAX_LABELS: Final = 256
MAX_CAPABILITIES: Final = 64
MAX_SIGNALS: Final = 64
"""Health signals on one GPU or port."""
MAX_COUNT: Final = 1_000_000
"""Cores (and any other count a report carries) at most."""

LabelKey = Annotated[str, StringConstraints(min_length=1, max_length=317)]
"""Kubernetes' limit: a 253-character prefix, '/', a 63-character name."""
LabelValue = Annotated[str, StringConstraints(max_length=1024)]


class GpuHealthState(StrEnum):
    HEALTHY = "healthy"
    AT_RISK = "at_risk"
    FAULTED = "faulted"


class HealthSignal(WireModel):
    """One reason a GPU is at risk or faulted, in words a person can act on."""

    kind: str = Field(description="stable key, e.g. xid, pcie_replay, ecc_correctable")
    message: str = Field(description="e.g. 'PCIe replays: 41/min, above 31/min for Gen5 x16'")
    since: datetime | None = None

    @field_serializer("since")
    def _iso(self, value: datetime | None) -> str | None:
        return value.isoformat() if value else None


class GpuHealth(WireModel):
    state: GpuHealthState = GpuHealthState.HEALTHY
    signals: list[HealthSignal] = Field(default_factory=list, max_length=MAX_SIGNALS)


class GpuInfo(WireModel):
    index: int = Field(ge=0, le=MAX_COUNT)
    uuid: str
    vendor: Vendor
    model: str = Field(description="the model name as the driver reports it")
    memory_bytes: int = Field(ge=0, le=INT64_MAX)
    pci_bus_id: str | None = Field(default=None, description="sysfs form, e.g. 0000:18:00.0")
    numa_node: int | None = Field(default=None, ge=-1, le=MAX_COUNT)
    health: GpuHealth = Field(default_factory=GpuHealth)
    nvlink_domain: str | None = Field(
        default=None, description="multi-node NVLink domain: '<cluster uuid>/<clique id>'"
    )
    xgmi_hive: str | None = Field(
        default=None, description="AMD XGMI hive id, local to the machine"
    )
    device_node: str | None = Field(
        default=None,
        description="the GPU's own device node: /dev/nvidia<NVML minor number>, or the "
        "/dev/dri/renderD<n> its PCI device lists in sysfs (AMD, Intel)",
    )


class LinkLayer(StrEnum):
    INFINIBAND = "InfiniBand"
    ETHERNET = "Ethernet"


class RdmaPort(WireModel):
    device: str
    port: int = Field(ge=1, le=65535)
    state: str = Field(description="e.g. ACTIVE, DOWN (the name part of the sysfs state file)")
    physical_state: str | None = Field(default=None, description="e.g. LinkUp, Polling")
    link_layer: LinkLayer
    rate_gbps: float = Field(ge=0, le=MAX_COUNT)
    subnet_prefix: str | None = Field(default=None, description="GID 0's first 64 bits")
    fabric: str | None = Field(default=None, description="derived fabric name of an IB port")
    numa_node: int | None = Field(default=None, ge=-1, le=MAX_COUNT)
    pci_device: str | None = None
    netdev: str | None = Field(default=None, description="the netdev of a RoCE port")
    omni_path: bool = Field(
        default=False,
        description="an Omni-Path port (hfi1): RDMA, but not InfiniBand; never in NCCL_IB_HCA",
    )
    at_risk: bool = False
    signals: list[HealthSignal] = Field(default_factory=list, max_length=MAX_SIGNALS)

    @property
    def up(self) -> bool:
        return self.state.upper() == "ACTIVE"

    @property
    def hca_name(self) -> str:
        """`mlx5_0:1`, the form NCCL_IB_HCA takes."""
        return f"{self.device}:{self.port}"


class PressureCondition(StrEnum):
    MEMORY = "MemoryPressure"
    DISK = "DiskPressure"
    PID = "PIDPressure"


class DriveInfo(WireModel):
    """A drive the machine holds, or reaches over the network, as its agent is configured."""

    name: str
    path: str | None = Field(default=None, description="where the drive is on this machine")
    capacity_bytes: int = Field(default=0, ge=0, le=INT64_MAX)
    free_bytes: int = Field(default=0, ge=0, le=INT64_MAX)
    local: bool = Field(default=True, description="on this machine (true) or reached remotely")
    reachable: bool = Field(
        default=True, description="the agent could read it at its last scan (statvfs answered)"
    )


class BackendStatus(WireModel):
    """Which discovery backend produced the GPUs, and why (or why there are none)."""

    name: str = Field(description="nvml, amdsmi, intel, fake or none")
    detail: str = ""


MAX_NETWORK_INTERFACES = 32
"""A report lists at most this many interfaces, physical ones first (a Kubernetes node can have
hundreds of veths)."""


class NetworkInterface(WireModel):
    """An IP network interface (sysfs `class/net`), for the advertised address, NCCL's socket
    interface and the machine's Ethernet speed. Loopback is never listed."""

    name: str = Field(description="e.g. eth0, ens1f0np0, ib0")
    kind: str = Field(
        default="ethernet", description="ethernet, infiniband (IPoIB) or other (sysfs `type`)"
    )
    state: str = Field(description="the kernel's operstate: up, down, unknown, dormant, ...")
    speed_mbps: int | None = Field(
        default=None,
        ge=0,
        le=100_000_000,
        description="link speed in Mb/s; None when the driver gives none",
    )
    mtu: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    mac: str | None = Field(default=None, description="hardware address, e.g. 0c:42:a1:03:65:ab")
    physical: bool = Field(
        default=False, description="backed by a device, not a bridge, veth, bond or tunnel"
    )
    ipv4: list[str] = Field(default_factory=list, max_length=256, description="e.g. 10.0.0.5")
    ipv6: list[str] = Field(
        default_factory=list,
        max_length=256,
        description="global and unique-local addresses, no link-local",
    )

    @property
    def up(self) -> bool:
        return self.state == "up"


class ImexStatus(WireModel):
    available: bool = False
    detail: str = ""


class MachineReport(WireModel):
    """Everything the coordinator needs to know about one machine, from its agent."""

    schema_version: Annotated[str, Field(pattern=r"^\d+\.\d+$")]
    name: str = Field(min_length=1, max_length=253)
    hostname: str | None = None
    agent_version: str | None = None
    labels: dict[LabelKey, LabelValue] = Field(
        default_factory=dict,
        max_length=MAX_LABELS,
        description="labels that grant access (`pool`, and any the coordinator's "
        "`access_labels` lists) are ignored: admins set those",
    )
    cpu_cores: float = Field(ge=0, le=MAX_COUNT, description="allocatable cores")
    memory_bytes: int = Field(ge=0, le=INT64_MAX, description="allocatable memory")
    free_cpu_cores: float | None = Field(default=None, ge=0, le=MAX_COUNT)
    free_memory_bytes: int | None = Field(default=None, ge=0, le=INT64_MAX)
    conditions: list[PressureCondition] = Field(default_factory=list, max_length=8)
    cpu_pressure: bool = False
    capabilities: list[str] = Field(default_factory=list, max_length=MAX_CAPABILITIES)
    drives: list[DriveInfo] = Field(default_factory=list, max_length=MAX_DRIVES)
    data_free_bytes: int | None = Field(default=None, ge=0, le=INT64_MAX)
    gpus: list[GpuInfo] = Field(default_factory=list, max_length=MAX_GPUS)
    gpu_backend: BackendStatus = Field(default_factory=lambda: BackendStatus(name="none"))
    rdma_ports: list[RdmaPort] = Field(default_factory=list, max_length=MAX_RDMA_PORTS)
    network_interfaces: list[NetworkInterface] = Field(
        default_factory=list, max_length=MAX_NETWORK_INTERFACES
    )
    imex: ImexStatus = Field(default_factory=ImexStatus)
    advertise_address: str | None = Field(
        default=None,
        max_length=45,
        description="the IP address other machines reach this one at (`MASTER_ADDR` when "
        "worker 0 runs here): the agent's `advertise_address` setting, else the source address "
        "of its route to the coordinator",
    )
    reported_at: datetime | None = None

    @field_validator("advertise_address")
    @classmethod
    def _reachable(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            ip = ipaddress.ip_address(value)
        except ValueError:
            raise ValueError(f"{value!r} is not an IP address") from None
        if ip.is_unspecified or ip.is_multicast or (ip.version == 6 and ip.is_link_local):
            raise ValueError(
                f"{value} is not an address other machines can reach (unspecified, multicast or"
                " IPv6 link-local)"
            )
        return str(ip)

    @field_validator("schema_version")
    @classmethod
    def _supported_major(cls, value: str) -> str:
        major = int(value.split(".", 1)[0])
        if major != SCHEMA_MAJOR:
            raise ValueError(
                f"schema_version {value} is not supported: this coordinator reads "
                f"{SCHEMA_MAJOR}.x; upgrade the coordinator and agent to the same major version"
            )
        return value

    @field_serializer("reported_at")
    def _iso(self, value: datetime | None) -> str | None:
        return value.isoformat() if value else None
