"""A fake `pynvml` module over a fake machine, faithful to nvidia-ml-py (docs/hardware.md §9).

Constants, error classes and structs are the real module's; only the functions are replaced.
Errors are the real `NVMLError_*` subclasses, strings are `str`, the fabric call mutates the
struct passed by `byref`, and the event wait raises `NVMLError_Timeout` when nothing arrives.
"""

import ctypes
import inspect
import math
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pynvml  # type: ignore[import-untyped]

if TYPE_CHECKING:
    from .state import FakeMachine

_FABRIC_STATES = {"not_supported": 0, "not_started": 1, "in_progress": 2, "completed": 3}
_HEALTH_MASKS = {
    "healthy": 2,  # DEGRADED_BW = FALSE
    "degraded": 1,  # DEGRADED_BW = TRUE
    "limited": 1,
    "unhealthy": 2 | (1 << 4),  # ROUTE_UNHEALTHY = TRUE
}


_NVLINK5_FIELDS = frozenset(range(206, 223))
"""`NVML_FI_DEV_NVLINK_COUNT_MALFORMED_PACKET_ERRORS` (206) … `_SYMBOL_BER` (222)."""
_NVLINK_TOTALS = {
    pynvml.NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL: (pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT,),
    pynvml.NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL: (pynvml.NVML_NVLINK_ERROR_DL_CRC_DATA,),
    pynvml.NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL: (pynvml.NVML_NVLINK_ERROR_DL_REPLAY,),
    pynvml.NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL: (pynvml.NVML_NVLINK_ERROR_DL_RECOVERY,),
}
"""The driver's error totals over all links (38, 45, 52, 59): the sum of the per-link counter
`nvmlDeviceGetNvLinkErrorCounter` gives for each link, active or not."""
_NVLINK_FIELDS = frozenset(
    {pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT, pynvml.NVML_FI_DEV_NVLINK_GET_STATE, *_NVLINK_TOTALS}
)
"""What a GPU without NVLink answers NOT_SUPPORTED for, as its per-link calls raise NotSupported."""
_LINK_ACTIVE = pynvml.NVML_NVLINK_STATE_ACTIVE


@dataclass
class FakeHandle:
    index: int


@dataclass
class FakeEventData:
    """Shaped like `c_nvmlEventData_t`."""

    device: FakeHandle
    eventType: int  # noqa: N815 - NVML's own field names
    eventData: int  # noqa: N815
    gpuInstanceId: int = 0xFFFFFFFF  # noqa: N815
    computeInstanceId: int = 0xFFFFFFFF  # noqa: N815


class FakeEventSet:
    def __init__(self) -> None:
        self.handles: set[int] = set()
        self.pending: list[FakeEventData] = []
        self.ready = threading.Condition()


def _err(cls_name: str) -> Exception:
    exc: Exception = getattr(pynvml, cls_name)()
    return exc


class FakeNvml:
    """Stands in for the `pynvml` module; the backend cannot tell the difference."""

    def __init__(self, machine: "FakeMachine") -> None:
        self._machine = machine
        self._initialised = 0
        self._event_sets: list[FakeEventSet] = []
        self._delivered: dict[int, int] = {}
        machine.on_xid = self._deliver

    def __getattr__(self, name: str) -> Any:
        value = getattr(pynvml, name)
        if inspect.isfunction(value):
            raise AttributeError(f"the fake pynvml does not implement {name}")
        return value

    # --- init and enumeration
    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        self._initialised += 1

    def nvmlShutdown(self) -> None:  # noqa: N802
        self._check()
        self._initialised -= 1

    def nvmlSystemGetDriverVersion(self) -> str:  # noqa: N802
        self._check()
        return "570.86.15"

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        self._check()
        return len(self._machine.present_gpus())

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:  # noqa: N802
        self._check()
        present = self._machine.present_gpus()
        if not 0 <= index < len(present):
            raise _err("NVMLError_InvalidArgument")
        return FakeHandle(present[index])

    # --- identity
    def nvmlDeviceGetUUID(self, h: FakeHandle) -> str:  # noqa: N802
        self._device(h, "nvmlDeviceGetUUID")
        return self._machine.gpu_uuid(h.index)

    def nvmlDeviceGetName(self, h: FakeHandle) -> str:  # noqa: N802
        return str(self._device(h, "nvmlDeviceGetName").model)

    def nvmlDeviceGetMemoryInfo(self, h: FakeHandle) -> Any:  # noqa: N802
        gpu = self._device(h, "nvmlDeviceGetMemoryInfo")
        memory = pynvml.c_nvmlMemory_t()
        memory.total = int((gpu.memory_gb or 0) * 1024**3)
        memory.used = min(memory.total, int(gpu.memory_used_gb * 1024**3))
        memory.free = memory.total - memory.used
        return memory

    # --- telemetry
    def nvmlDeviceGetTemperature(self, h: FakeHandle, sensor: int) -> int:  # noqa: N802
        gpu = self._device(h, "nvmlDeviceGetTemperature")
        if sensor != pynvml.NVML_TEMPERATURE_GPU:
            raise _err("NVMLError_InvalidArgument")
        return round(float(gpu.temperature_c))

    def nvmlDeviceGetPowerUsage(self, h: FakeHandle) -> int:  # noqa: N802
        """Milliwatts, as NVML answers."""
        return round(float(self._device(h, "nvmlDeviceGetPowerUsage").power_watts) * 1000)

    def nvmlDeviceGetUtilizationRates(self, h: FakeHandle) -> Any:  # noqa: N802
        gpu = self._device(h, "nvmlDeviceGetUtilizationRates")
        rates = pynvml.c_nvmlUtilization_t()
        rates.gpu, rates.memory = round(gpu.utilization_percent), 0
        return rates

    # --- field values
    def nvmlDeviceGetFieldValues(self, h: FakeHandle, field_ids: list[Any]) -> Any:  # noqa: N802
        """The real call's shape: an array of `c_nvmlFieldValue_t`, one per id (an int or a
        `(fieldId, scopeId)` pair), each with its own `nvmlReturn`; NOT_SUPPORTED for a field
        this GPU does not have."""
        gpu = self._device(h, "nvmlDeviceGetFieldValues")
        values = (pynvml.c_nvmlFieldValue_t * len(field_ids))()
        for value, wanted in zip(values, field_ids, strict=True):
            field, scope = wanted if isinstance(wanted, tuple) else (wanted, 0)
            value.fieldId, value.scopeId = field, scope
            value.timestamp = int(self._machine.elapsed_seconds() * 1e6)
            self._field(gpu, value)
        return values

    def _field(self, gpu: Any, value: Any) -> None:
        field, scope = value.fieldId, value.scopeId
        if field == pynvml.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION:
            value.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
            value.value.uiVal = gpu.recovery_action
        elif field in _NVLINK_FIELDS and gpu.nvlinks == 0:
            value.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED  # as the per-link calls answer
            return
        elif field == pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT:
            value.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
            value.value.uiVal = gpu.nvlinks
        elif field == pynvml.NVML_FI_DEV_NVLINK_GET_STATE:
            if scope >= gpu.nvlinks:
                value.nvmlReturn = pynvml.NVML_ERROR_INVALID_ARGUMENT
                return
            value.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
            down = scope in gpu.nvlinks_down
            value.value.uiVal = pynvml.NVML_NVLINK_STATE_INACTIVE if down else _LINK_ACTIVE
        elif field in _NVLINK_TOTALS:
            value.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
            value.value.ullVal = sum(
                self._link_errors(gpu, link, counter)
                for link in range(gpu.nvlinks)
                for counter in _NVLINK_TOTALS[field]
            )
        elif field in _NVLINK5_FIELDS and gpu.nvlink5 and scope < gpu.nvlinks:
            value.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
            symbol = value.fieldId == pynvml.NVML_FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS
            grown = symbol and value.scopeId == 0
            value.value.ullVal = self._grown(gpu.nvlink5_errors_per_min) if grown else 0
        else:
            value.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
            return
        value.nvmlReturn = pynvml.NVML_SUCCESS

    def nvmlDeviceGetPciInfo(self, h: FakeHandle) -> Any:  # noqa: N802
        self._device(h, "nvmlDeviceGetPciInfo")
        domain, bus = 0, self._machine.gpu_bus(h.index)
        info = pynvml.nvmlPciInfo_t()
        info.domain, info.bus, info.device = domain, bus, 0
        info.busId = f"{domain:08X}:{bus:02X}:00.0".encode()
        info.busIdLegacy = f"{domain:04X}:{bus:02X}:00.0".encode()
        info.pciDeviceId = 0x233010DE
        return info

    def nvmlDeviceGetNumaNodeId(self, h: FakeHandle) -> int:  # noqa: N802
        gpu = self._device(h, "nvmlDeviceGetNumaNodeId")
        return int(gpu.numa_node if gpu.numa_node is not None else self._machine.gpu_numa(h.index))

    def nvmlDeviceGetMinorNumber(self, h: FakeHandle) -> int:  # noqa: N802
        """The driver numbers `/dev/nvidia<minor>` by slot at load: a GPU that falls off the bus
        shifts NVML's indices, not the other GPUs' minor numbers."""
        self._device(h, "nvmlDeviceGetMinorNumber")
        return h.index

    # --- memory errors
    def nvmlDeviceGetTotalEccErrors(self, h: FakeHandle, kind: int, counter: int) -> int:  # noqa: N802
        gpu = self._device(h, "nvmlDeviceGetTotalEccErrors")
        if kind == pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED:
            return int(gpu.ecc_uncorrected)
        return self._grown(gpu.ecc_corrected_per_min)

    def nvmlDeviceGetRemappedRows(self, h: FakeHandle) -> tuple[int, int, int, int]:  # noqa: N802
        gpu = self._device(h, "nvmlDeviceGetRemappedRows")
        unc = 1 if gpu.remap_pending or gpu.remap_failure else 0
        return (0, unc, int(gpu.remap_pending), int(gpu.remap_failure))

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h: FakeHandle) -> int:  # noqa: N802
        return int(self._device(h, "nvmlDeviceGetRetiredPagesPendingStatus").retired_pages_pending)

    # --- PCIe
    def nvmlDeviceGetPcieReplayCounter(self, h: FakeHandle) -> int:  # noqa: N802
        return self._grown(self._device(h, "nvmlDeviceGetPcieReplayCounter").pcie_replays_per_min)

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: FakeHandle) -> int:  # noqa: N802
        return int(self._device(h, "nvmlDeviceGetCurrPcieLinkGeneration").pcie_gen)

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: FakeHandle) -> int:  # noqa: N802
        return int(self._device(h, "nvmlDeviceGetCurrPcieLinkWidth").pcie_width)

    # --- NVLink
    def nvmlDeviceGetNvLinkState(self, h: FakeHandle, link: int) -> int:  # noqa: N802
        gpu = self._device(h, "nvmlDeviceGetNvLinkState")
        self._link(gpu.nvlinks, link)
        return 0 if link in gpu.nvlinks_down else pynvml.NVML_FEATURE_ENABLED

    def nvmlDeviceGetNvLinkErrorCounter(self, h: FakeHandle, link: int, counter: int) -> int:  # noqa: N802
        gpu = self._device(h, "nvmlDeviceGetNvLinkErrorCounter")
        self._link(gpu.nvlinks, link)
        return self._link_errors(gpu, link, counter)

    def _link_errors(self, gpu: Any, link: int, counter: int) -> int:
        """One link's error counter: the GPU's errors all fall on link 0."""
        per_link = {
            pynvml.NVML_NVLINK_ERROR_DL_REPLAY: gpu.nvlink_replays_per_min,
            pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT: gpu.nvlink_crc_per_min,
        }.get(counter, 0.0)
        return self._grown(per_link / gpu.nvlinks) if link == 0 else 0

    # --- throttling
    def nvmlDeviceGetViolationStatus(self, h: FakeHandle, policy: int) -> Any:  # noqa: N802
        gpu = self._device(h, "nvmlDeviceGetViolationStatus")
        fraction = {
            pynvml.NVML_PERF_POLICY_THERMAL: gpu.thermal_throttle_fraction,
            pynvml.NVML_PERF_POLICY_POWER: gpu.power_throttle_fraction,
        }.get(policy, 0.0)
        elapsed_ns = int(self._machine.elapsed_seconds() * 1e9)
        violation = pynvml.c_nvmlViolationTime_t()
        violation.referenceTime, violation.violationTime = elapsed_ns, int(elapsed_ns * fraction)
        return violation

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: FakeHandle) -> int:  # noqa: N802
        gpu = self._device(h, "nvmlDeviceGetCurrentClocksEventReasons")
        reasons = pynvml.nvmlClocksEventReasonGpuIdle
        if gpu.thermal_throttle_fraction:
            reasons |= pynvml.nvmlClocksThrottleReasonHwThermalSlowdown
        if gpu.power_throttle_fraction:
            reasons |= pynvml.nvmlClocksEventReasonSwPowerCap
        return int(reasons)

    # --- fabric
    def nvmlDeviceGetGpuFabricInfoV(self, h: FakeHandle, info_ref: Any) -> int:  # noqa: N802
        fabric = self._device(h, "nvmlDeviceGetGpuFabricInfoV").fabric
        if fabric is None:
            raise _err("NVMLError_NotSupported")
        info = info_ref._obj  # the struct `ctypes.byref` points at
        info.clusterUuid = (ctypes.c_uint8 * 16)(*fabric.cluster_uuid.bytes)
        info.cliqueId = fabric.clique_id
        info.state = _FABRIC_STATES[fabric.state]
        info.status = pynvml.NVML_SUCCESS if fabric.status_ok else pynvml.NVML_ERROR_UNKNOWN
        info.healthMask = _HEALTH_MASKS[fabric.health]
        return int(pynvml.NVML_SUCCESS)

    # --- events
    def nvmlEventSetCreate(self) -> FakeEventSet:  # noqa: N802
        self._check()
        event_set = FakeEventSet()
        self._event_sets.append(event_set)
        return event_set

    def nvmlDeviceGetSupportedEventTypes(self, h: FakeHandle) -> int:  # noqa: N802
        self._device(h, "nvmlDeviceGetSupportedEventTypes")
        return int(pynvml.nvmlEventTypeXidCriticalError | pynvml.nvmlEventTypeDoubleBitEccError)

    def nvmlDeviceRegisterEvents(self, h: FakeHandle, mask: int, es: FakeEventSet) -> None:  # noqa: N802
        self._device(h, "nvmlDeviceRegisterEvents")
        if mask & pynvml.nvmlEventTypeXidCriticalError:
            es.handles.add(h.index)
            for xid in self._machine.spec_gpu(h.index).xids:
                self._queue(es, h.index, xid)

    def nvmlEventSetWait_v2(self, es: FakeEventSet, timeout_ms: int) -> FakeEventData:  # noqa: N802
        self._check()
        self._machine.read_xid_log()
        with es.ready:
            if not es.pending and timeout_ms > 0:
                es.ready.wait(timeout_ms / 1000)
            if not es.pending:
                raise _err("NVMLError_Timeout")
            return es.pending.pop(0)

    def nvmlEventSetFree(self, es: FakeEventSet) -> None:  # noqa: N802
        with es.ready:
            es.handles.clear()
        self._event_sets.remove(es)

    # --- internals
    def _deliver(self, index: int, xid: int) -> None:
        for es in self._event_sets:
            if index in es.handles:
                self._queue(es, index, xid)

    @staticmethod
    def _queue(es: FakeEventSet, index: int, xid: int) -> None:
        with es.ready:
            es.pending.append(
                FakeEventData(FakeHandle(index), pynvml.nvmlEventTypeXidCriticalError, xid)
            )
            es.ready.notify_all()

    def _check(self) -> None:
        if self._initialised <= 0:
            raise _err("NVMLError_Uninitialized")

    def _device(self, h: FakeHandle, function: str) -> Any:
        self._check()
        gpu = self._machine.spec_gpu(h.index)
        if function in gpu.unsupported:
            raise _err("NVMLError_FunctionNotFound")
        if function in gpu.fail:
            raise _err(gpu.fail[function])
        if gpu.lost or h.index not in self._machine.present_gpus():
            raise _err("NVMLError_GpuIsLost")
        return gpu

    @staticmethod
    def _link(count: int, link: int) -> None:
        if count == 0:
            raise _err("NVMLError_NotSupported")
        if not 0 <= link < count:
            raise _err("NVMLError_InvalidArgument")

    def _grown(self, per_minute: float) -> int:
        return math.floor(per_minute * self._machine.elapsed_seconds() / 60)
