"""AMD GPUs from sysfs alone, for a machine whose amdgpu driver is loaded but whose AMD SMI
library is not installed: identity, memory, how busy, temperature and power where the driver
exposes them, and the PCIe replay counter. What only AMD SMI gives (ECC, bad pages, throttling,
XGMI) is reported as unknown, never as healthy-by-default."""

import os
from pathlib import Path

from astraeus.shared import Vendor

from .amd import pcie_link
from .base import BackendUnavailableError, GpuSample, WithoutEvents
from .drm import DrmCard, drm_cards, read_text, render_node

AMD_VENDOR = "0x1002"
DRIVER = "amdgpu"
UNKNOWN = "ECC errors, retired pages, throttling, XGMI: unknown without AMD SMI"
"""The scan warning of every GPU this backend reads."""


def amdgpu_cards(sysfs_root: Path) -> list[DrmCard]:
    """Each amdgpu card, by card number."""
    return [c for c in drm_cards(sysfs_root) if c.vendor == AMD_VENDOR and c.driver == DRIVER]


class AmdgpuSysfsBackend(WithoutEvents):
    """Samples every amdgpu DRM card. `why` says why AMD SMI is not used."""

    def __init__(self, sysfs_root: Path, *, why: str, name: str = "amdgpu") -> None:
        self.name, self._sysfs = name, sysfs_root
        found = amdgpu_cards(sysfs_root)
        if not found:
            raise BackendUnavailableError("amdgpu: no amdgpu DRM device")
        gpus = f"{len(found)} GPU" + ("s" if len(found) != 1 else "")
        self.detail = (
            f"sysfs amdgpu, {gpus}; amdgpu present without AMD SMI ({why}): "
            "ECC, retired pages, throttling and XGMI are unknown"
        )

    def sample(self) -> list[GpuSample]:
        return [_sample(index, card) for index, card in enumerate(amdgpu_cards(self._sysfs))]


def _sample(index: int, card: DrmCard) -> GpuSample:
    device = card.device
    unique = read_text(device / "unique_id")
    name = read_text(device / "product_name")
    s = GpuSample(
        index=index,
        # ROCm's own UUID form (rocminfo, ROCR_VISIBLE_DEVICES) is GPU-<unique_id>
        uuid=f"GPU-{unique}" if unique else f"amdgpu-{card.bdf or f'card{card.card}'}",
        vendor=Vendor.AMD,
        model=name or f"AMD GPU {card.device_id or 'unknown'}",
        memory_bytes=_int(device / "mem_info_vram_total") or 0,
        pci_bus_id=card.bdf,
        numa_node=card.numa_node,
        device_node=render_node(device),
    )
    s.memory_used_bytes = _int(device / "mem_info_vram_used")
    busy = _int(device / "gpu_busy_percent")
    s.utilization_percent = float(busy) if busy is not None else None
    s.pcie_gen, s.pcie_width = pcie_link(device)
    replays = _int(device / "pcie_replay_count")
    if replays is not None:
        s.counters["pcie_replays"] = float(replays)
    s.temperature_c, s.power_watts = _hwmon(device)
    s.unavailable.append(UNKNOWN)
    return s


def _hwmon(device: Path) -> tuple[float | None, float | None]:
    """Edge temperature (millidegrees) and average power (microwatts) from the card's hwmon."""
    try:
        names = sorted(os.listdir(device / "hwmon"))
    except OSError:
        return None, None
    for name in names:
        temp = _int(device / "hwmon" / name / "temp1_input")
        power = _int(device / "hwmon" / name / "power1_average")
        if temp is not None or power is not None:
            return (
                temp / 1000 if temp is not None else None,
                power / 1e6 if power is not None else None,
            )
    return None, None


def _int(path: Path) -> int | None:
    text = read_text(path) or ""
    return int(text) if text.isdigit() else None
