"""Intel GPUs: identity and count from sysfs DRM devices (PCI vendor 0x8086, i915 or xe), so a
run asking `vendor: intel` can be matched. Intel GPUs carry no health signals here."""

import os
import re
from collections.abc import Callable
from pathlib import Path

from astraeus.shared import Vendor

from .base import BackendUnavailableError, GpuSample, XidEvent
from .drm import render_node

INTEL_VENDOR = "0x8086"
DRIVERS = ("i915", "xe")
_CARD = re.compile(r"^card(\d+)$")


def intel_cards(sysfs_root: Path) -> list[tuple[int, Path]]:
    """`(card number, PCI device dir)` for each Intel i915/xe card, by card number."""
    drm = sysfs_root / "class/drm"
    try:
        names = os.listdir(drm)
    except OSError:
        return []
    cards = []
    for name in names:
        match = _CARD.match(name)
        device = drm / name / "device"
        if match and _read(device / "vendor") == INTEL_VENDOR and _driver(device) in DRIVERS:
            cards.append((int(match.group(1)), device))
    return sorted(cards)


class IntelBackend:
    name = "intel"

    def __init__(self, sysfs_root: Path, *, name: str = "intel") -> None:
        self.name, self._sysfs = name, sysfs_root
        found = intel_cards(sysfs_root)
        if not found:
            raise BackendUnavailableError("Intel: no i915 or xe DRM device")
        self.detail = f"sysfs DRM, {len(found)} Intel GPUs"

    def sample(self) -> list[GpuSample]:
        samples = []
        for index, (_card, device) in enumerate(intel_cards(self._sysfs)):
            bdf = Path(os.path.realpath(device)).name
            numa = _read(device / "numa_node") or ""
            samples.append(
                GpuSample(
                    index=index,
                    uuid=f"intel-{bdf}",
                    vendor=Vendor.INTEL,
                    model=f"Intel GPU {_read(device / 'device') or 'unknown'}",
                    pci_bus_id=bdf,
                    numa_node=int(numa) if numa.isdigit() else None,  # "-1": no NUMA
                    device_node=render_node(device),
                )
            )
        return samples

    def xid_events(self) -> list[XidEvent]:
        return []

    def start_listening(self, wake: Callable[[], None]) -> None:
        return None

    def close(self) -> None:
        return None


def _driver(device: Path) -> str | None:
    try:
        return Path(os.readlink(device / "driver")).name
    except OSError:
        return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None
