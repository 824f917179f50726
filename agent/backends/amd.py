"""AMD GPUs through `amdsmi`, imported lazily: without the ROCm library the import prints to
stdout and raises `KeyError`, which becomes a clear `AMD SMI library not found` state."""

import contextlib
import importlib
import io
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from astraeus.shared import Vendor

from .base import BackendUnavailableError, GpuSample, XidEvent
from .drm import render_node

log = logging.getLogger(__name__)

_PENDING_PAGE = 1  # AmdSmiMemoryPageStatus.PENDING
_GT_PER_S_TO_GEN = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6, 128.0: 7}


def import_amdsmi() -> Any:
    """The real `amdsmi` module, or `BackendUnavailableError` saying why."""
    with contextlib.redirect_stdout(io.StringIO()):  # its loader prints when the lib is missing
        try:
            return importlib.import_module("amdsmi")
        except ModuleNotFoundError:
            raise BackendUnavailableError("AMD SMI: the amdsmi package is not installed") from None
        except Exception as exc:  # KeyError('libamd_smi.so') without ROCm
            raise BackendUnavailableError(f"AMD SMI library not found ({exc!r})") from None


class AmdBackend:
    """Samples every AMD GPU `amdsmi` lists. AMD has no Xids; health comes from counters."""

    def __init__(self, lib: Any, *, sysfs_root: Path, name: str = "amdsmi") -> None:
        self.lib, self.name, self._sysfs = lib, name, sysfs_root
        try:
            lib.amdsmi_init(lib.AmdSmiInitFlags.INIT_AMD_GPUS)
            self._handles = list(lib.amdsmi_get_processor_handles())
        except lib.AmdSmiException as exc:
            raise BackendUnavailableError(f"AMD SMI: {exc}") from None
        if not self._handles:
            lib.amdsmi_shut_down()
            raise BackendUnavailableError("AMD SMI: no AMD GPUs")
        self.detail = f"AMD SMI, {len(self._handles)} GPUs"

    def sample(self) -> list[GpuSample]:
        self._handles = list(self.lib.amdsmi_get_processor_handles())
        return [self._sample(i, h) for i, h in enumerate(self._handles)]

    def _sample(self, index: int, h: Any) -> GpuSample:
        lib = self.lib
        try:
            bdf = lib.amdsmi_get_gpu_device_bdf(h)
            s = GpuSample(index=index, uuid=lib.amdsmi_get_gpu_device_uuid(h), vendor=Vendor.AMD)
        except lib.AmdSmiException as exc:
            s = GpuSample(index=index, uuid=f"amd-unknown-index-{index}", vendor=Vendor.AMD)
            s.lost = True
            s.unavailable.append(f"cannot be read: {exc}")
            return s
        s.pci_bus_id = bdf
        asic = self._opt(s, lib.amdsmi_get_gpu_asic_info, h) or {}
        s.model = str(asic.get("market_name", "AMD GPU"))
        s.memory_bytes = int(
            self._opt(s, lib.amdsmi_get_gpu_memory_total, h, lib.AmdSmiMemoryType.VRAM) or 0
        )
        s.numa_node = self._opt(s, lib.amdsmi_topo_get_numa_node_number, h)
        self._errors(h, s)
        xgmi = self._opt(s, lib.amdsmi_get_xgmi_info, h) or {}
        hive = xgmi.get("xgmi_hive_id")
        s.xgmi_hive = f"{hive:#x}" if isinstance(hive, int) and hive else None
        s.pcie_gen, s.pcie_width = pcie_link(self._sysfs / "bus/pci/devices" / bdf)
        s.device_node = render_node(self._sysfs / "bus/pci/devices" / bdf)
        metrics = self._opt(s, lib.amdsmi_get_gpu_metrics_info, h) or {}
        throttled = metrics.get("throttle_status")
        s.throttled_now = throttled if isinstance(throttled, bool) else None  # or "N/A"
        return s

    def _errors(self, h: Any, s: GpuSample) -> None:
        lib = self.lib
        ecc = self._opt(s, lib.amdsmi_get_gpu_total_ecc_count, h) or {}
        if _number(ecc.get("correctable_count")) is not None:
            s.counters["ecc_corrected"] = float(ecc["correctable_count"])
        s.ecc_uncorrected = int(_number(ecc.get("uncorrectable_count")) or 0)
        pages = self._opt(s, lib.amdsmi_get_gpu_bad_page_info, h) or []
        s.retired_pending = any(page.get("status") == _PENDING_PAGE for page in pages)
        replays = _number(self._opt(s, lib.amdsmi_get_gpu_pci_replay_counter, h))
        if replays is not None:
            s.counters["pcie_replays"] = float(replays)

    def _opt(self, s: GpuSample, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except self.lib.AmdSmiException as exc:
            s.unavailable.append(f"{getattr(fn, '__name__', 'call')}: {exc}")
            return None

    def xid_events(self) -> list[XidEvent]:
        return []

    def start_listening(self, wake: Callable[[], None]) -> None:
        return None

    def close(self) -> None:
        try:
            self.lib.amdsmi_shut_down()
        except self.lib.AmdSmiException as exc:
            log.warning("AMD SMI shutdown: %s", exc)


def _number(value: Any) -> int | None:
    """AMD SMI answers the string "N/A" for values it cannot read."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def pcie_link(device: Path) -> tuple[int | None, int | None]:
    """PCIe generation and width from sysfs (`32.0 GT/s PCIe`, `16`)."""
    try:
        speed = float((device / "current_link_speed").read_text().split()[0])
        width = int((device / "current_link_width").read_text().strip())
    except (OSError, ValueError, IndexError):
        return None, None
    return _GT_PER_S_TO_GEN.get(speed), width
