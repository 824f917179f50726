"""The NVML backend driven through the fake pynvml, and the fake's fidelity to nvidia-ml-py."""

import ctypes
import threading
from collections.abc import Callable

import pynvml
import pytest

from astraeus.agent.backends import BackendUnavailableError, nvml
from astraeus.agent.backends.nvml import NvmlBackend, nvml_busid_to_sysfs
from astraeus.agent.fake import FakeMachine
from astraeus.agent.fake.nvml import FakeNvml
from astraeus.shared.clock import FakeClock

Factory = Callable[[str], FakeMachine]


def test_bus_id_converts_to_sysfs_form() -> None:
    """NVML's 8-digit upper-case domain becomes sysfs's 4-digit lower-case one."""
    assert nvml_busid_to_sysfs("00000000:18:00.0") == "0000:18:00.0"
    assert nvml_busid_to_sysfs("0001:AB:00.0") == "0001:ab:00.0"


def test_fake_behaves_like_pynvml(machine_factory: Factory) -> None:
    """The fake raises the real error subclasses, returns str and the real shapes, and fills
    the real fabric struct passed by reference."""
    lib = FakeNvml(machine_factory("gb200-nvl72-tray"))
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        lib.nvmlDeviceGetCount()
    lib.nvmlInit()
    h = lib.nvmlDeviceGetHandleByIndex(0)
    assert isinstance(lib.nvmlDeviceGetUUID(h), str)
    assert lib.nvmlDeviceGetPciInfo(h).busId == "00000000:18:00.0"
    assert lib.nvmlDeviceGetRemappedRows(h) == (0, 0, 0, 0)
    info = pynvml.c_nvmlGpuFabricInfoV_t()
    assert lib.nvmlDeviceGetGpuFabricInfoV(h, ctypes.byref(info)) == pynvml.NVML_SUCCESS
    assert info.state == pynvml.NVML_GPU_FABRIC_STATE_COMPLETED
    assert info.cliqueId == 1
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        lib.nvmlDeviceGetNvLinkState(h, 18)
    es = lib.nvmlEventSetCreate()
    with pytest.raises(pynvml.NVMLError_Timeout) as raised:
        lib.nvmlEventSetWait_v2(es, 0)
    assert raised.value.value == pynvml.NVML_ERROR_TIMEOUT
    with pytest.raises(AttributeError, match="does not implement nvmlDeviceGetSerial"):
        lib.nvmlDeviceGetSerial(h)


def test_fake_functions_all_exist_in_pynvml() -> None:
    """Every function the fake offers is a real nvidia-ml-py function of the same name."""
    faked = [n for n in vars(FakeNvml) if n.startswith("nvml")]
    assert len(faked) >= 25
    assert [n for n in faked if not callable(getattr(pynvml, n, None))] == []


def test_samples_carry_identity_and_fabric(machine_factory: Factory, clock: FakeClock) -> None:
    """Each GPU's identity, sysfs bus id, NUMA node and completed fabric come through."""
    machine = machine_factory("gb200-nvl72-tray")
    backend = NvmlBackend(FakeNvml(machine), clock=clock)
    samples = backend.sample()
    assert [s.index for s in samples] == [0, 1, 2, 3]
    first = samples[0]
    assert (first.uuid, first.model, first.memory_bytes) == (
        machine.gpu_uuid(0), "NVIDIA GB200", 186 * 1024**3,
    )  # fmt: skip
    assert (first.pci_bus_id, first.numa_node, first.pcie_gen) == ("0000:18:00.0", 0, 6)
    assert first.fabric is not None
    assert first.fabric.completed
    assert first.fabric.status_ok
    assert first.fabric.cluster_uuid == "7b968a6d-c8aa-45e1-9e07-e1e51be99c31"
    assert first.counters["nvlink_replay"] == 0
    assert first.unavailable == []
    backend.close()


def test_missing_driver_call_degrades_one_signal(
    machine_factory: Factory, clock: FakeClock
) -> None:
    """A driver without the fabric or remap call still gives the rest of the sample."""
    machine = machine_factory("h100-sxm")
    machine.spec.gpus.unsupported = ["nvmlDeviceGetRemappedRows", "nvmlDeviceGetGpuFabricInfoV"]
    sample = NvmlBackend(FakeNvml(machine), clock=clock).sample()[0]
    assert sample.unavailable == [
        "nvmlDeviceGetRemappedRows: Function Not Found",
        "nvmlDeviceGetGpuFabricInfoV: Function Not Found",
    ]
    assert sample.model == "NVIDIA H100 80GB HBM3"
    assert not sample.lost


def test_lost_gpu_is_marked_lost_with_its_known_uuid(
    machine_factory: Factory, clock: FakeClock
) -> None:
    """A GPU that falls off the bus after a first sample is reported lost under its UUID."""
    machine = machine_factory("h100-sxm")
    backend = NvmlBackend(FakeNvml(machine), clock=clock)
    backend.sample()
    machine.lose_gpu(3)
    lost = backend.sample()[3]
    assert (lost.uuid, lost.lost, lost.unavailable) == (machine.gpu_uuid(3), True, ["GPU is lost"])


def test_no_gpus_is_unavailable(machine_factory: Factory, clock: FakeClock) -> None:
    """A driver that lists no GPUs makes the backend unavailable, saying so."""
    machine = machine_factory("h100-sxm")
    for index in range(8):
        machine.remove_gpu(index)
    with pytest.raises(BackendUnavailableError, match="NVML: the driver lists no GPUs"):
        NvmlBackend(FakeNvml(machine), clock=clock)


def test_real_pynvml_without_a_driver_says_why(clock: FakeClock) -> None:
    """On this GPU-less machine the real pynvml fails to init and the backend says why."""
    with pytest.raises(BackendUnavailableError, match="NVML: NVML Shared Library Not Found"):
        NvmlBackend(pynvml, clock=clock)


def test_xids_drained_on_scan_without_a_thread(machine_factory: Factory, clock: FakeClock) -> None:
    """Without the listener thread, each call drains the event set without blocking."""
    machine = machine_factory("h100-at-risk")
    backend = NvmlBackend(FakeNvml(machine), clock=clock)
    backend.sample()
    events = backend.xid_events()
    assert [(e.uuid, e.xid) for e in events] == [(machine.gpu_uuid(5), 79)]
    machine.inject_xid(2, 94)
    assert [(e.uuid, e.xid) for e in backend.xid_events()] == [(machine.gpu_uuid(2), 94)]
    assert backend.xid_events() == []


def test_listener_thread_wakes_on_xid(machine_factory: Factory, clock: FakeClock) -> None:
    """With the listener thread running, an Xid wakes the caller and is queued for the scan."""
    machine = machine_factory("h100-sxm")
    backend = NvmlBackend(FakeNvml(machine), clock=clock)
    woke = threading.Event()
    backend.start_listening(woke.set)
    machine.inject_xid(4, 48)
    assert woke.wait(timeout=10)
    assert [(e.uuid, e.xid) for e in backend.xid_events()] == [(machine.gpu_uuid(4), 48)]
    backend.close()


@pytest.mark.parametrize(
    ("error", "reset_required", "unavailable"),
    [
        pytest.param("NVMLError_ResetRequired", True, [], id="reset-required"),
        pytest.param("NVMLError_NoPermission", False,
                     ["health reads stopped: Insufficient Permissions"], id="other-error"),
    ],
)  # fmt: skip
def test_one_gpus_error_spares_the_others(
    machine_factory: Factory, clock: FakeClock, error: str, reset_required: bool,
    unavailable: list[str],
) -> None:  # fmt: skip
    """An NVML error in one GPU's health reads marks that GPU only; the rest sample fully."""
    machine = machine_factory("h100-sxm")
    machine.spec.gpu[1] = {"fail": {"nvmlDeviceGetPcieReplayCounter": error}}
    samples = NvmlBackend(FakeNvml(machine), clock=clock).sample()
    assert (samples[1].reset_required, samples[1].unavailable) == (reset_required, unavailable)
    assert [s.reset_required or bool(s.unavailable) for s in samples].count(True) == 1


def test_identity_follows_gpus_that_go_and_come(machine_factory: Factory, clock: FakeClock) -> None:
    """Names, bus ids and device nodes are kept per GPU, not per index: when a GPU leaves the
    driver's list the others shift down an index with their own identity, and when it comes
    back it has its own again."""
    machine = machine_factory("h100-sxm")
    backend = NvmlBackend(FakeNvml(machine), clock=clock)
    before = backend.sample()
    machine.remove_gpu(1)
    shifted = backend.sample()
    assert [s.uuid for s in shifted] == [machine.gpu_uuid(i) for i in (0, 2, 3, 4, 5, 6, 7)]
    assert [(s.pci_bus_id, s.device_node) for s in shifted[1:]] == [
        (s.pci_bus_id, s.device_node) for s in before[2:]
    ]
    machine.restore_gpu(1)
    back = backend.sample()
    assert [(s.uuid, s.pci_bus_id, s.device_node, s.numa_node) for s in back] == [
        (s.uuid, s.pci_bus_id, s.device_node, s.numa_node) for s in before
    ]


def test_identity_is_read_again_on_refresh_and_every_so_often(
    machine_factory: Factory, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fact of the same GPU that changes unannounced (its NUMA node, after a firmware
    setting) shows after `refresh()` (a udev event) or REREAD_SCANS scans, not before."""
    monkeypatch.setattr(nvml, "REREAD_SCANS", 3)
    machine = machine_factory("h100-sxm")
    backend = NvmlBackend(FakeNvml(machine), clock=clock)
    assert backend.sample()[0].numa_node == 0
    machine.spec_gpu(0).numa_node = 1
    assert backend.sample()[0].numa_node == 0
    backend.refresh()
    assert backend.sample()[0].numa_node == 1
    machine.spec_gpu(0).numa_node = 0
    assert [backend.sample()[0].numa_node for _ in range(3)] == [1, 1, 0]


def test_kept_identity_keeps_its_warnings(machine_factory: Factory, clock: FakeClock) -> None:
    """A driver without an identity call says so in every sample, not only the first."""
    machine = machine_factory("h100-sxm")
    machine.spec.gpus.unsupported = ["nvmlDeviceGetMinorNumber"]
    backend = NvmlBackend(FakeNvml(machine), clock=clock)
    for _ in range(2):
        sample = backend.sample()[0]
        assert (sample.device_node, sample.unavailable) == (
            None, ["nvmlDeviceGetMinorNumber: Function Not Found"],
        )  # fmt: skip
