"""NVML field values read in one `nvmlDeviceGetFieldValues` call per GPU: the GPU recovery
action (field 230, R570+) and, per NVLink, the NVLink5 (Blackwell) error counters that replace
`nvmlDeviceGetNvLinkErrorCounter` there (docs/hardware.md §1.7, §1.11).

Each value carries its own return code: a field this GPU or driver does not have answers
`NVML_ERROR_NOT_SUPPORTED` and is skipped quietly (every pre-Blackwell GPU lacks the NVLink5
counters); only a driver without the call itself is worth a scan warning."""

from typing import TYPE_CHECKING, Any

from .base import GpuSample

if TYPE_CHECKING:
    from .nvml import NvmlBackend

NVLINK5_COUNTERS = {
    "malformed_packet_errors": "NVML_FI_DEV_NVLINK_COUNT_MALFORMED_PACKET_ERRORS",
    "buffer_overrun_errors": "NVML_FI_DEV_NVLINK_COUNT_BUFFER_OVERRUN_ERRORS",
    "rcv_errors": "NVML_FI_DEV_NVLINK_COUNT_RCV_ERRORS",
    "rcv_remote_errors": "NVML_FI_DEV_NVLINK_COUNT_RCV_REMOTE_ERRORS",
    "rcv_general_errors": "NVML_FI_DEV_NVLINK_COUNT_RCV_GENERAL_ERRORS",
    "local_link_integrity_errors": "NVML_FI_DEV_NVLINK_COUNT_LOCAL_LINK_INTEGRITY_ERRORS",
    "link_recovery_failed_events": "NVML_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_FAILED_EVENTS",
    "effective_errors": "NVML_FI_DEV_NVLINK_COUNT_EFFECTIVE_ERRORS",
    "symbol_errors": "NVML_FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS",
}
"""The counters DCGM's NVLink5 health watch fails on any growth of (`MonitorNVLink5Fields`);
summed over the GPU's links into `counters["nvlink5_<name>"]`."""

_VALUE = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
"""`NVML_VALUE_TYPE_*` → the member of `c_nvmlValue_t` that holds it."""


def read_fields(backend: "NvmlBackend", h: Any, s: GpuSample, links: int) -> None:
    lib = backend.lib
    recovery = lib.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION
    wanted: list[tuple[int, int]] = [(recovery, 0)]
    names = {getattr(lib, const): name for name, const in NVLINK5_COUNTERS.items()}
    wanted += [(field, link) for link in range(links) for field in names]
    values = backend.optional(s, lib.nvmlDeviceGetFieldValues, h, wanted)
    if values is None:
        return
    totals: dict[str, float] = {}
    for value in values:
        if value.nvmlReturn != lib.NVML_SUCCESS:
            continue
        number = _number(value)
        if value.fieldId == recovery:
            s.recovery_action = int(number)
        elif value.fieldId in names:
            key = "nvlink5_" + names[value.fieldId]
            totals[key] = totals.get(key, 0.0) + number
    s.counters.update(totals)


def _number(value: Any) -> float:
    return float(getattr(value.value, _VALUE.get(int(value.valueType), "ullVal")))
