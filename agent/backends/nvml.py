"""NVIDIA GPUs through `pynvml` (nvidia-ml-py), or through the fake module with the same face.

A driver that lacks a call (`Function Not Found`, `Not Supported`) degrades that signal only;
`GPU is lost` marks that GPU lost; anything else fails the whole sample with a clear message."""

import ctypes
import logging
import queue
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from astraeus.shared import Vendor
from astraeus.shared.clock import Clock

from .base import BackendUnavailableError, FabricSample, GpuSample, XidEvent
from .nvml_fields import FieldReader, stagger

log = logging.getLogger(__name__)

WAIT_MS = 1000
"""How long the event thread blocks in one `nvmlEventSetWait_v2` call."""


REREAD_SCANS = 100
"""A GPU's identity (name, bus id, NUMA node, device node) is read again this often."""


class _LostError(Exception):
    pass


@dataclass
class _Identity:
    """What does not change while the same GPU answers at an NVML index."""

    uuid: str
    model: str
    pci_bus_id: str
    numa_node: int | None
    device_node: str | None
    unavailable: list[str]
    """The identity calls this driver lacks, said again in every sample's `unavailable`."""
    scans: int = 0


def nvml_busid_to_sysfs(bus_id: str) -> str:
    """`00000000:18:00.0` (NVML) → `0000:18:00.0` (sysfs), as go-nvlib does."""
    s = bus_id.strip().lower()
    return s[4:] if re.match(r"^0{4}[0-9a-f]{4}:", s) else s


class NvmlBackend:
    """Samples every GPU NVML lists; drains Xid events from one NVML event set."""

    name = "nvml"

    def __init__(self, lib: Any, *, name: str = "nvml", clock: Clock) -> None:
        self.lib, self.name, self._clock = lib, name, clock
        try:
            lib.nvmlInit()
            count = lib.nvmlDeviceGetCount()
            driver = lib.nvmlSystemGetDriverVersion()
        except lib.NVMLError as exc:
            raise BackendUnavailableError(f"NVML: {exc}") from None
        if count == 0:
            lib.nvmlShutdown()
            raise BackendUnavailableError("NVML: the driver lists no GPUs")
        self.detail = f"NVML, driver {driver}, {count} GPUs"
        self._events: queue.SimpleQueue[XidEvent] = queue.SimpleQueue()
        self._event_set: Any = None
        self._events_tried = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._known: dict[int, str] = {}
        self.fields = FieldReader(lib)
        self._identities: dict[int, _Identity] = {}

    # --- sampling
    def sample(self) -> list[GpuSample]:
        with self._lock:
            count = self.lib.nvmlDeviceGetCount()
            samples = [self._sample(i) for i in range(count)]
            self._register_events()
        return samples

    def _sample(self, index: int) -> GpuSample:
        try:
            handle = self.lib.nvmlDeviceGetHandleByIndex(index)
            sample = self._identity(index, handle)
        except self.lib.NVMLError_GpuIsLost:
            return self._lost_sample(index, "GPU is lost")
        except self.lib.NVMLError as exc:
            return self._lost_sample(index, f"cannot be read: {exc}")
        try:
            self._health(handle, sample)
        except _LostError:
            sample.lost = True
        except self.lib.NVMLError_ResetRequired:
            sample.reset_required = True
        except self.lib.NVMLError as exc:  # one GPU's odd answer must not sink the others
            sample.unavailable.append(f"health reads stopped: {exc}")
        return sample

    def _lost_sample(self, index: int, why: str) -> GpuSample:
        known = self._known.get(index, f"GPU-unknown-index-{index}")
        sample = GpuSample(index=index, uuid=known, vendor=Vendor.NVIDIA, lost=True)
        sample.unavailable.append(why)
        return sample

    def _identity(self, index: int, h: Any) -> GpuSample:
        """The UUID (read every scan: it says which GPU answers at this index now) and memory
        (the used figure moves); the name, bus id, NUMA node and device node are kept per GPU
        and read again only for a new UUID, after `refresh()` or every `REREAD_SCANS` scans."""
        lib = self.lib
        uuid_text = lib.nvmlDeviceGetUUID(h)
        self._known[index] = uuid_text
        sample = GpuSample(index=index, uuid=uuid_text, vendor=Vendor.NVIDIA)
        memory = lib.nvmlDeviceGetMemoryInfo(h)
        sample.memory_bytes, sample.memory_used_bytes = int(memory.total), int(memory.used)
        kept = self._identities.get(index)
        if kept is None or kept.uuid != uuid_text or kept.scans >= REREAD_SCANS:
            due = kept is not None and kept.uuid == uuid_text
            kept = self._read_identity(index, h, uuid_text)
            if not due:
                kept.scans = -stagger(index, REREAD_SCANS)
        kept.scans += 1
        sample.model, sample.pci_bus_id = kept.model, kept.pci_bus_id
        sample.numa_node, sample.device_node = kept.numa_node, kept.device_node
        sample.unavailable += kept.unavailable
        return sample

    def _read_identity(self, index: int, h: Any, uuid_text: str) -> "_Identity":
        lib = self.lib
        probe = GpuSample(index=index, uuid=uuid_text, vendor=Vendor.NVIDIA)
        model = lib.nvmlDeviceGetName(h)
        bus_id = nvml_busid_to_sysfs(lib.nvmlDeviceGetPciInfo(h).busId)
        numa = self._optional(probe, lib.nvmlDeviceGetNumaNodeId, h)
        minor = self._optional(probe, lib.nvmlDeviceGetMinorNumber, h)
        node = None if minor is None else f"/dev/nvidia{minor}"
        kept = _Identity(uuid_text, model, bus_id, numa, node, list(probe.unavailable))
        self._identities[index] = kept
        return kept

    def refresh(self) -> None:
        """Read every GPU's identity and field plan afresh at the next sample (a udev event:
        a device came, went or changed)."""
        with self._lock:
            self._identities.clear()
            self.fields.plans.clear()

    def _health(self, h: Any, s: GpuSample) -> None:
        lib, opt = self.lib, self._optional
        corrected = opt(
            s, lib.nvmlDeviceGetTotalEccErrors, h, lib.NVML_MEMORY_ERROR_TYPE_CORRECTED,
            lib.NVML_VOLATILE_ECC,
        )  # fmt: skip
        uncorrected = opt(
            s, lib.nvmlDeviceGetTotalEccErrors, h, lib.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
            lib.NVML_VOLATILE_ECC,
        )  # fmt: skip
        s.ecc_uncorrected = int(uncorrected or 0)
        self._counter(s, "ecc_corrected", corrected)
        rows = opt(s, lib.nvmlDeviceGetRemappedRows, h)
        if rows is not None:
            s.remap_pending, s.remap_failure = bool(rows[2]), bool(rows[3])
        s.retired_pending = bool(opt(s, lib.nvmlDeviceGetRetiredPagesPendingStatus, h))
        self._counter(s, "pcie_replays", opt(s, lib.nvmlDeviceGetPcieReplayCounter, h))
        s.pcie_gen = opt(s, lib.nvmlDeviceGetCurrPcieLinkGeneration, h)
        s.pcie_width = opt(s, lib.nvmlDeviceGetCurrPcieLinkWidth, h)
        plan = self.fields.read(self, h, s)
        if plan is None or not plan.link_fields:
            self._nvlinks(h, s)
        self._throttle(h, s)
        s.fabric = self._fabric(h, s)
        self._telemetry(h, s)

    def _telemetry(self, h: Any, s: GpuSample) -> None:
        lib, opt = self.lib, self._optional
        temperature = opt(s, lib.nvmlDeviceGetTemperature, h, lib.NVML_TEMPERATURE_GPU)
        s.temperature_c = float(temperature) if temperature is not None else None
        milliwatts = opt(s, lib.nvmlDeviceGetPowerUsage, h)
        s.power_watts = milliwatts / 1000 if milliwatts is not None else None
        rates = opt(s, lib.nvmlDeviceGetUtilizationRates, h)
        s.utilization_percent = float(rates.gpu) if rates is not None else None

    def _nvlinks(self, h: Any, s: GpuSample) -> int:
        """Reads each link's state and error counters by per-link calls, for a driver without
        the link fields (`nvml_fields`); returns how many links the GPU has."""
        lib = self.lib
        kinds = {
            "nvlink_replay": (lib.NVML_NVLINK_ERROR_DL_REPLAY,),
            "nvlink_recovery": (lib.NVML_NVLINK_ERROR_DL_RECOVERY,),
            "nvlink_crc": (lib.NVML_NVLINK_ERROR_DL_CRC_FLIT, lib.NVML_NVLINK_ERROR_DL_CRC_DATA),
        }
        totals = dict.fromkeys(kinds, 0)
        links = 0
        for link in range(lib.NVML_NVLINK_MAX_LINKS):
            try:
                active = self._call(lib.nvmlDeviceGetNvLinkState, h, link)
            except (lib.NVMLError_InvalidArgument, lib.NVMLError_NotSupported):
                break  # past the device's last link, or no NVLink at all
            links += 1
            if active != lib.NVML_FEATURE_ENABLED:
                s.nvlinks_down.append(link)
                continue
            for key, counters in kinds.items():
                for counter in counters:
                    value = self._optional(s, lib.nvmlDeviceGetNvLinkErrorCounter, h, link, counter)
                    totals[key] += int(value or 0)
        if links:
            s.counters.update({key: float(total) for key, total in totals.items()})
        return links

    def _throttle(self, h: Any, s: GpuSample) -> None:
        lib = self.lib
        s.clock_event_reasons = self._optional(s, lib.nvmlDeviceGetCurrentClocksEventReasons, h)
        for key, policy in (
            ("thermal_ns", lib.NVML_PERF_POLICY_THERMAL),
            ("power_ns", lib.NVML_PERF_POLICY_POWER),
        ):
            violation = self._optional(s, lib.nvmlDeviceGetViolationStatus, h, policy)
            if violation is not None:
                s.counters[key] = float(violation.violationTime)

    def _fabric(self, h: Any, s: GpuSample) -> FabricSample | None:
        lib = self.lib
        info = lib.c_nvmlGpuFabricInfoV_t()
        try:
            self._call(lib.nvmlDeviceGetGpuFabricInfoV, h, ctypes.byref(info))
        except lib.NVMLError_NotSupported:
            return None
        except lib.NVMLError_FunctionNotFound as exc:
            s.unavailable.append(f"nvmlDeviceGetGpuFabricInfoV: {exc}")
            return None
        raw = bytes(info.clusterUuid)
        return FabricSample(
            cluster_uuid=str(uuid.UUID(bytes=raw)) if any(raw) else None,
            clique_id=int(info.cliqueId),
            completed=info.state == lib.NVML_GPU_FABRIC_STATE_COMPLETED,
            status_ok=info.status == lib.NVML_SUCCESS,
            problems=_fabric_problems(lib, int(info.healthMask)),
        )

    def _counter(self, s: GpuSample, key: str, value: int | None) -> None:
        if value is not None:
            s.counters[key] = float(value)

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except self.lib.NVMLError_GpuIsLost:
            raise _LostError from None

    def optional(self, s: GpuSample, fn: Callable[..., Any], *args: Any) -> Any:
        return self._optional(s, fn, *args)

    def _optional(self, s: GpuSample, fn: Callable[..., Any], *args: Any) -> Any:
        """Call `fn`; a driver that lacks it degrades this one signal."""
        try:
            return self._call(fn, *args)
        except (self.lib.NVMLError_FunctionNotFound, self.lib.NVMLError_NotSupported) as exc:
            name = getattr(fn, "__name__", "call")
            if f"{name}: {exc}" not in s.unavailable:
                s.unavailable.append(f"{name}: {exc}")
            return None

    # --- Xid events
    def _register_events(self) -> None:
        """Once: one event set for every GPU's Xids. Without it health goes on from counters."""
        lib = self.lib
        if self._events_tried:
            return
        self._events_tried = True
        try:
            self._event_set = lib.nvmlEventSetCreate()
        except lib.NVMLError as exc:
            log.warning("Xid events unavailable: %s", exc)
            return
        for index in range(lib.nvmlDeviceGetCount()):
            try:
                h = lib.nvmlDeviceGetHandleByIndex(index)
                mask = lib.nvmlDeviceGetSupportedEventTypes(h) & lib.nvmlEventTypeXidCriticalError
                lib.nvmlDeviceRegisterEvents(h, mask, self._event_set)
            except lib.NVMLError as exc:
                log.warning("GPU %d: Xid events unavailable: %s", index, exc)

    def xid_events(self) -> list[XidEvent]:
        if self._thread is None:
            with self._lock:
                self._drain(timeout_ms=0)
        found = []
        while not self._events.empty():
            found.append(self._events.get_nowait())
        return found

    def _drain(self, timeout_ms: int) -> bool:
        """Read events until the set is empty; True when at least one arrived."""
        lib, got = self.lib, False
        if self._event_set is None:
            return False
        while True:
            try:
                event = lib.nvmlEventSetWait_v2(self._event_set, timeout_ms)
            except lib.NVMLError_Timeout:
                return got
            except lib.NVMLError as exc:
                log.warning("NVML event wait failed: %s", exc)
                if timeout_ms:  # the listener thread: do not spin on a lasting failure
                    self._stop.wait(WAIT_MS / 1000)
                return got
            timeout_ms = 0
            if event.eventType == lib.nvmlEventTypeXidCriticalError:
                self._events.put(
                    XidEvent(self._uuid_of(event), int(event.eventData), self._clock.now())
                )
                got = True

    def _uuid_of(self, event: Any) -> str:
        try:
            return str(self.lib.nvmlDeviceGetUUID(event.device))
        except self.lib.NVMLError:
            return self._known.get(getattr(event.device, "index", -1), "GPU-unknown")

    def start_listening(self, wake: Callable[[], None]) -> None:
        if self._thread is not None:
            return
        with self._lock:
            self._register_events()
        if self._event_set is None:
            return

        def listen() -> None:
            while not self._stop.is_set():
                if self._drain(timeout_ms=WAIT_MS):
                    wake()

        self._thread = threading.Thread(target=listen, name="nvml-xid-events", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=WAIT_MS / 1000 + 1)
        lib = self.lib
        try:
            if self._event_set is not None:
                lib.nvmlEventSetFree(self._event_set)
            lib.nvmlShutdown()
        except lib.NVMLError as exc:
            log.warning("NVML shutdown: %s", exc)


def _fabric_problems(lib: Any, mask: int) -> list[str]:
    problems = []
    if (mask >> 0) & 0x3 == 1:
        problems.append("NVLink fabric bandwidth degraded")
    if (mask >> 4) & 0x3 == 1:
        problems.append("NVLink fabric route unhealthy")
    if (mask >> 2) & 0x3 == 1:
        problems.append("NVLink fabric route recovery in progress")
    return problems
