"""Intel GPUs: identity and count from sysfs DRM devices (PCI vendor 0x8086, i915 or xe), so a
run asking `vendor: intel` can be matched. Intel GPUs carry no health signals here."""

from pathlib import Path

from astraeus.shared import Vendor

from .base import BackendUnavailableError, GpuSample, WithoutEvents
from .drm import DrmCard, drm_cards, render_node

INTEL_VENDOR = "0x8086"
DRIVERS = ("i915", "xe")


def intel_cards(sysfs_root: Path) -> list[DrmCard]:
    """Each Intel i915/xe card, by card number."""
    return [
        card
        for card in drm_cards(sysfs_root)
        if card.vendor == INTEL_VENDOR and card.driver in DRIVERS
    ]


class IntelBackend(WithoutEvents):
    name = "intel"

    def __init__(self, sysfs_root: Path, *, name: str = "intel") -> None:
        self.name, self._sysfs = name, sysfs_root
        found = intel_cards(sysfs_root)
        if not found:
            raise BackendUnavailableError("Intel: no i915 or xe DRM device")
        self.detail = f"sysfs DRM, {len(found)} Intel GPUs"

    def sample(self) -> list[GpuSample]:
        return [
            GpuSample(
                index=index,
                uuid=f"intel-{card.bdf}" if card.bdf else f"intel-card{card.card}",
                vendor=Vendor.INTEL,
                model=f"Intel GPU {card.device_id or 'unknown'}",
                pci_bus_id=card.bdf,
                numa_node=card.numa_node,
                device_node=render_node(card.device),
            )
            for index, card in enumerate(intel_cards(self._sysfs))
        ]
