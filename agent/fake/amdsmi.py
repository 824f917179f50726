"""A fake `amdsmi` module over a fake machine, faithful to amdsmi 7.0.2 (docs/hardware.md §4, §9):
exact dict keys, `"N/A"` for values a GPU cannot give, library exceptions with error codes."""

from enum import IntEnum
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from .state import FakeMachine

AMDSMI_STATUS_NOT_SUPPORTED = 2
AMDSMI_STATUS_NOT_INIT = 32


class AmdSmiException(Exception):  # noqa: N818 - amdsmi's own names
    pass


class AmdSmiLibraryException(AmdSmiException):
    _INFO: ClassVar[dict[int, str]] = {
        2: "AMDSMI_STATUS_NOT_SUPPORTED - Feature not supported",
        32: "AMDSMI_STATUS_NOT_INIT - Processor not initialized",
    }

    def __init__(self, err_code: int) -> None:
        super().__init__(err_code)
        self.err_code = abs(err_code)

    def get_error_code(self) -> int:
        return self.err_code

    def get_error_info(self, detailed: bool = True) -> str:
        return self._INFO.get(self.err_code, f"AMDSMI_STATUS {self.err_code}")

    def __str__(self) -> str:
        return self.get_error_info()


class AmdSmiInitFlags(IntEnum):
    INIT_ALL_PROCESSORS = 0xFFFFFFFF
    INIT_AMD_CPUS = 1
    INIT_AMD_GPUS = 2


class AmdSmiMemoryType(IntEnum):
    VRAM = 0
    VIS_VRAM = 1
    GTT = 2


class AmdSmiMemoryPageStatus(IntEnum):
    RESERVED = 0
    PENDING = 1
    UNRESERVABLE = 2


class FakeProcessorHandle:
    def __init__(self, index: int) -> None:
        self.index = index


class FakeAmdSmi:
    """Stands in for the `amdsmi` module."""

    AmdSmiException = AmdSmiException
    AmdSmiLibraryException = AmdSmiLibraryException
    AmdSmiInitFlags = AmdSmiInitFlags
    AmdSmiMemoryType = AmdSmiMemoryType
    AmdSmiMemoryPageStatus = AmdSmiMemoryPageStatus

    def __init__(self, machine: "FakeMachine") -> None:
        self._machine = machine
        self._ready = False

    def amdsmi_init(self, flag: int = 2) -> None:
        self._ready = True

    def amdsmi_shut_down(self) -> None:
        self._ready = False

    def amdsmi_get_processor_handles(self) -> list[FakeProcessorHandle]:
        self._check()
        return [FakeProcessorHandle(i) for i in self._machine.present_gpus()]

    def amdsmi_get_gpu_device_bdf(self, h: FakeProcessorHandle) -> str:
        self._gpu(h, "amdsmi_get_gpu_device_bdf")
        return f"0000:{self._machine.gpu_bus(h.index):02x}:00.0"

    def amdsmi_get_gpu_device_uuid(self, h: FakeProcessorHandle) -> str:
        self._gpu(h, "amdsmi_get_gpu_device_uuid")
        return self._machine.gpu_uuid(h.index).removeprefix("GPU-")

    def amdsmi_get_gpu_asic_info(self, h: FakeProcessorHandle) -> dict[str, Any]:
        gpu = self._gpu(h, "amdsmi_get_gpu_asic_info")
        return {
            "market_name": gpu.model, "vendor_id": "0x1002", "vendor_name": "AMD",
            "subvendor_id": "0x1002", "device_id": "0x74a1", "rev_id": "0x00",
            "asic_serial": f"0x{h.index:016X}", "oam_id": h.index, "num_compute_units": 304,
            "target_graphics_version": "gfx942", "subsystem_id": "0x74a1",
        }  # fmt: skip

    def amdsmi_get_gpu_memory_total(self, h: FakeProcessorHandle, kind: int) -> int:
        return int((self._gpu(h, "amdsmi_get_gpu_memory_total").memory_gb or 0) * 1024**3)

    def amdsmi_topo_get_numa_node_number(self, h: FakeProcessorHandle) -> int:
        gpu = self._gpu(h, "amdsmi_topo_get_numa_node_number")
        return gpu.numa_node if gpu.numa_node is not None else self._machine.gpu_numa(h.index)

    def amdsmi_get_gpu_total_ecc_count(self, h: FakeProcessorHandle) -> dict[str, Any]:
        gpu = self._gpu(h, "amdsmi_get_gpu_total_ecc_count")
        corrected = int(gpu.ecc_corrected_per_min * self._machine.elapsed_seconds() / 60)
        return {"correctable_count": corrected, "uncorrectable_count": gpu.ecc_uncorrected,
                "deferred_count": 0}  # fmt: skip

    def amdsmi_get_gpu_bad_page_info(self, h: FakeProcessorHandle) -> list[dict[str, Any]]:
        if not self._gpu(h, "amdsmi_get_gpu_bad_page_info").retired_pages_pending:
            return []
        return [{"value": 0, "page_address": 0x3F000, "page_size": 4096,
                 "status": AmdSmiMemoryPageStatus.PENDING}]  # fmt: skip

    def amdsmi_get_gpu_pci_replay_counter(self, h: FakeProcessorHandle) -> int:
        rate = self._gpu(h, "amdsmi_get_gpu_pci_replay_counter").pcie_replays_per_min
        return int(rate * self._machine.elapsed_seconds() / 60)

    def amdsmi_get_gpu_metrics_info(self, h: FakeProcessorHandle) -> dict[str, Any]:
        """A few of the real keys; 7.0.2 converts `throttle_status` to a bool."""
        gpu = self._gpu(h, "amdsmi_get_gpu_metrics_info")
        throttled = bool(gpu.thermal_throttle_fraction or gpu.power_throttle_fraction)
        return {
            "temperature_edge": "N/A", "temperature_hotspot": 55, "temperature_mem": 48,
            "throttle_status": throttled, "indep_throttle_status": throttled,
            "pcie_replay_count_acc": self.amdsmi_get_gpu_pci_replay_counter(h),
            "xgmi_link_status": [1] * 7,
        }  # fmt: skip

    def amdsmi_get_xgmi_info(self, h: FakeProcessorHandle) -> dict[str, Any]:
        gpu = self._gpu(h, "amdsmi_get_xgmi_info")
        hive = int(gpu.xgmi_hive, 16) if gpu.xgmi_hive else "N/A"
        return {"xgmi_lanes": 16, "xgmi_hive_id": hive, "xgmi_node_id": h.index, "index": h.index}

    def _check(self) -> None:
        if not self._ready:
            raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_INIT)

    def _gpu(self, h: FakeProcessorHandle, function: str) -> Any:
        self._check()
        gpu = self._machine.spec_gpu(h.index)
        if function in gpu.unsupported:
            raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_SUPPORTED)
        return gpu
