"""DRM cards under `<sysfs>/class/drm`: which PCI device each one is.

Identity comes from the device's attribute files (`vendor`, `device`, the `driver` link and the
`device` link's target) and, where those are missing or are not links (a copied tree, a capture,
an unusual driver), from the device's `uevent` (`DRIVER=`, `PCI_ID=`, `PCI_SLOT_NAME=`). A bus id
is reported only when it looks like one: never the name `device` of an unresolved link."""

import os
import re
from dataclasses import dataclass
from pathlib import Path

_CARD = re.compile(r"^card(\d+)$")
BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


@dataclass(frozen=True)
class DrmCard:
    card: int
    device: Path
    """`<sysfs>/class/drm/card<N>/device`."""
    vendor: str | None
    """`0x8086`, lower case."""
    device_id: str | None
    """`0x5917`, lower case."""
    driver: str | None
    bdf: str | None
    """`0000:00:02.0`, or None when neither the link nor the uevent says."""

    @property
    def numa_node(self) -> int | None:
        text = read_text(self.device / "numa_node") or ""
        return int(text) if text.isdigit() else None  # "-1": no NUMA node


def drm_cards(sysfs_root: Path) -> list[DrmCard]:
    """Every `card<N>` with a device, by card number."""
    drm = sysfs_root / "class/drm"
    try:
        names = os.listdir(drm)
    except OSError:
        return []
    cards = []
    for name in names:
        match = _CARD.match(name)
        device = drm / name / "device"
        if match and os.path.lexists(device):
            cards.append(_card(int(match.group(1)), device))
    return sorted(cards, key=lambda c: c.card)


def _card(number: int, device: Path) -> DrmCard:
    event = uevent(device)
    pci_vendor, _, pci_device = event.get("PCI_ID", "").partition(":")
    return DrmCard(
        card=number,
        device=device,
        vendor=_hex(read_text(device / "vendor")) or _hex(pci_vendor),
        device_id=_hex(read_text(device / "device")) or _hex(pci_device),
        driver=_link_name(device / "driver") or event.get("DRIVER") or None,
        bdf=_bdf(device, event),
    )


def uevent(device: Path) -> dict[str, str]:
    """`KEY=VALUE` lines of the device's uevent file."""
    text = read_text(device / "uevent") or ""
    pairs = (line.partition("=") for line in text.splitlines())
    return {key: value for key, sep, value in pairs if sep}


def _bdf(device: Path, event: dict[str, str]) -> str | None:
    target = Path(os.path.realpath(device)).name.lower()
    if BDF.match(target):
        return target
    slot = event.get("PCI_SLOT_NAME", "").lower()
    return slot if BDF.match(slot) else None


def _hex(text: str | None) -> str | None:
    """`0x8086` from `0x8086` or `8086`; None for anything else."""
    raw = (text or "").strip().lower().removeprefix("0x")
    return f"0x{raw}" if raw and all(c in "0123456789abcdef" for c in raw) else None


def _link_name(path: Path) -> str | None:
    try:
        return Path(os.readlink(path)).name
    except OSError:  # missing, or a plain file where the link should be
        return None


def read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


_RENDER = re.compile(r"^renderD(\d+)$")


def render_node(pci_device: Path) -> str | None:
    """`/dev/dri/renderD<n>` of the PCI device at `pci_device`, or None when it lists none.

    The kernel registers each DRM minor as a child of its PCI device, so the device's folder
    holds `drm/card<n>` and `drm/renderD<n>`; the node in `/dev/dri` has the same name. The
    render node opens this GPU alone (AMD's KFD checks it too)."""
    try:
        names = os.listdir(pci_device / "drm")
    except OSError:
        return None
    nodes = sorted(int(m.group(1)) for m in map(_RENDER.match, names) if m)
    return f"/dev/dri/renderD{nodes[0]}" if nodes else None
