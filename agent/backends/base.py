"""What a backend gives the scanner: one raw sample per GPU, and the Xid events since last asked.

Samples carry cumulative counters; the health tracker turns their growth over time into
signals, so a backend keeps no history."""

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from astraeus.shared import Vendor


class BackendUnavailableError(Exception):
    """This backend cannot run here; the message says why (no driver, no library, no GPUs)."""


@dataclass
class FabricSample:
    """GPU fabric info: the multi-node NVLink domain, when the fabric manager set it up."""

    cluster_uuid: str | None
    clique_id: int
    completed: bool
    status_ok: bool
    problems: list[str] = field(default_factory=list)


@dataclass
class GpuSample:
    index: int
    uuid: str
    vendor: Vendor
    model: str = "unknown"
    memory_bytes: int = 0
    pci_bus_id: str | None = None
    numa_node: int | None = None
    lost: bool = False
    reset_required: bool = False
    counters: dict[str, float] = field(default_factory=dict)
    """Cumulative: ecc_corrected, pcie_replays, nvlink_replay, nvlink_recovery, nvlink_crc,
    nvlink5 counters (`nvlink5_<name>`), thermal_ns, power_ns (throttled time), as far as the
    driver gives them."""
    ecc_uncorrected: int = 0
    remap_pending: bool = False
    remap_failure: bool = False
    retired_pending: bool = False
    pcie_gen: int | None = None
    pcie_width: int | None = None
    nvlinks_down: list[int] = field(default_factory=list)
    clock_event_reasons: int | None = None
    """NVML's clock event ("throttle") reasons bitmask right now."""
    throttled_now: bool | None = None
    """A backend without throttle-time counters (AMD) says only whether it throttles now."""
    recovery_action: int | None = None
    """NVML's GPU recovery action (field 230, `NVML_GPU_RECOVERY_ACTION_*`), where the driver
    reports one."""
    fabric: FabricSample | None = None
    xgmi_hive: str | None = None
    device_node: str | None = None
    """`/dev/nvidia<minor>` (NVML) or `/dev/dri/renderD<n>` (sysfs): what opens this GPU alone."""
    unavailable: list[str] = field(default_factory=list)
    """Signals the driver could not give, e.g. `nvmlDeviceGetRemappedRows: Not Supported`."""
    # Telemetry for /metrics (None: this backend or driver does not give it)
    memory_used_bytes: int | None = None
    utilization_percent: float | None = None
    temperature_c: float | None = None
    power_watts: float | None = None


@dataclass(frozen=True)
class XidEvent:
    uuid: str
    xid: int
    at: datetime


class GpuBackend(Protocol):
    name: str
    detail: str

    def sample(self) -> list[GpuSample]:
        """One sample per GPU the driver lists now."""
        ...

    def xid_events(self) -> list[XidEvent]:
        """The Xid events since the last call; never blocks."""
        ...

    def start_listening(self, wake: Callable[[], None]) -> None:
        """Watch for events in the background and call `wake` when one arrives."""
        ...

    def close(self) -> None: ...


class WithoutEvents:
    """What a backend whose driver sends no events (sysfs, the null backend) shares: no Xid
    events, nothing to listen to in the background, nothing to close."""

    def xid_events(self) -> list[XidEvent]:
        return []

    def start_listening(self, wake: Callable[[], None]) -> None:
        return None

    def close(self) -> None:
        return None


class NoGpus(WithoutEvents):
    """The null backend: no GPUs, and why."""

    name = "none"

    def __init__(self, detail: str) -> None:
        self.detail = detail

    def sample(self) -> list[GpuSample]:
        return []
