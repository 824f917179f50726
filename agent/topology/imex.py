"""Whether this machine can give a worker IMEX channel 0 (docs/hardware.md §6)."""

import os
import re
from pathlib import Path

from astraeus.shared import ImexStatus

CHANNEL_DEVICE = "nvidia-caps-imex-channels"


def device_major(proc_devices: str, name: str = CHANNEL_DEVICE) -> int | None:
    """The character-device major registered under `name`, as NVIDIA's DRA driver finds it."""
    pattern = r"(?s)Character devices:.*?^\s*(\d+) " + re.escape(name) + r"$.*?Block devices:"
    match = re.search(pattern, proc_devices, re.M)
    return int(match.group(1)) if match else None


def imex_status(proc_root: Path, dev_root: Path) -> ImexStatus:
    """Available when the driver registered the channel device and channel 0 exists or can be
    made."""
    try:
        text = (proc_root / "devices").read_text()
    except OSError as exc:
        return ImexStatus(available=False, detail=f"cannot read /proc/devices: {exc.strerror}")
    major = device_major(text)
    if major is None:
        return ImexStatus(available=False, detail=f"no {CHANNEL_DEVICE} in /proc/devices")
    channels = dev_root / CHANNEL_DEVICE
    if (channels / "channel0").exists():
        return ImexStatus(available=True, detail=f"channel0 present (major {major})")
    parent = channels if channels.is_dir() else dev_root
    if os.access(parent, os.W_OK):
        return ImexStatus(available=True, detail=f"channel0 can be created (major {major})")
    return ImexStatus(
        available=False,
        detail=f"channel0 is missing and {parent} is not writable (major {major})",
    )
