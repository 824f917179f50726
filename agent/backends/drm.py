"""A GPU's DRM render node, as the kernel lists it in sysfs: `<PCI device>/drm/renderD<n>`.

The kernel registers each DRM minor as a child of its PCI device, so the folder of the
device (`/sys/bus/pci/devices/<bdf>`) holds `drm/card<n>` and `drm/renderD<n>`; the node in
`/dev/dri` has the same name. The render node opens this GPU alone (AMD's KFD checks it too)."""

import os
import re
from pathlib import Path

_RENDER = re.compile(r"^renderD(\d+)$")


def render_node(pci_device: Path) -> str | None:
    """`/dev/dri/renderD<n>` of the PCI device at `pci_device`, or None when it lists none."""
    try:
        names = os.listdir(pci_device / "drm")
    except OSError:
        return None
    nodes = sorted(int(m.group(1)) for m in map(_RENDER.match, names) if m)
    return f"/dev/dri/renderD{nodes[0]}" if nodes else None
