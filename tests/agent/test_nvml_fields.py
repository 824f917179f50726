"""NVML field values (GPU recovery action, NVLink5 counters), telemetry, and the health signals
they drive, through the fake pynvml that mirrors nvidia-ml-py."""

from collections.abc import Callable
from typing import Any

import pynvml
import pytest

from astraeus.agent.backends import GpuSample, XidEvent, nvml_fields
from astraeus.agent.backends.nvml import NvmlBackend
from astraeus.agent.fake import FakeMachine
from astraeus.agent.fake.nvml import FakeNvml
from astraeus.agent.health import HealthTracker
from astraeus.agent.health.xid import XidClass
from astraeus.shared import GpuHealthState, Vendor
from astraeus.shared.clock import FakeClock

from .conftest import START

Factory = Callable[[str], FakeMachine]


def test_fake_field_values_have_the_real_shape(machine_factory: Factory) -> None:
    """An array of the real c_nvmlFieldValue_t, one per id (int or (id, scope)), each with its
    own return code: NOT_SUPPORTED for fields the GPU lacks, never an exception."""
    lib = FakeNvml(machine_factory("h100-sxm"))
    lib.nvmlInit()
    h = lib.nvmlDeviceGetHandleByIndex(0)
    values = lib.nvmlDeviceGetFieldValues(
        h,
        [
            pynvml.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION,
            (pynvml.NVML_FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS, 3),
        ],
    )
    assert isinstance(values[0], pynvml.c_nvmlFieldValue_t)
    assert (values[0].nvmlReturn, values[0].valueType, values[0].value.uiVal) == (
        pynvml.NVML_SUCCESS, pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, 0,
    )  # fmt: skip
    assert (values[1].fieldId, values[1].scopeId) == (
        pynvml.NVML_FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS, 3,
    )  # fmt: skip
    assert values[1].nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED  # H100 is not NVLink5
    assert lib.nvmlDeviceGetPowerUsage(h) == 350_000  # milliwatts
    assert lib.nvmlDeviceGetUtilizationRates(h).gpu == 0
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        lib.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU_MAX)


def test_samples_carry_telemetry(machine_factory: Factory, clock: FakeClock) -> None:
    """Temperature, power in watts, utilisation and memory used come through NVML."""
    machine = machine_factory("h100-sxm")
    machine.spec.gpu[2] = {"temperature_c": 71, "utilization_percent": 93, "memory_used_gb": 60}
    sample = NvmlBackend(FakeNvml(machine), clock=clock).sample()[2]
    assert (sample.temperature_c, sample.power_watts, sample.utilization_percent) == (
        71.0, 350.0, 93.0,
    )  # fmt: skip
    assert sample.memory_used_bytes == 60 * 1024**3
    assert sample.unavailable == []


def test_nvlink5_counter_growth_is_at_risk(machine_factory: Factory, clock: FakeClock) -> None:
    """On Blackwell the NVLink5 counters (field values per link) are read; growth in the window
    puts the GPU at risk naming the counters."""
    machine = machine_factory("gb200-nvl72-tray")
    machine.spec.gpu[1] = {"nvlink5_errors_per_min": 6}
    backend, tracker = NvmlBackend(FakeNvml(machine), clock=clock), HealthTracker()
    first = backend.sample()[1]
    assert first.counters["nvlink5_symbol_errors"] == 0
    assert first.counters["nvlink5_rcv_errors"] == 0
    tracker.update(first, clock.now())
    clock.advance(30)
    health = tracker.update(backend.sample()[1], clock.now())
    assert health.state is GpuHealthState.AT_RISK
    assert [(s.kind, s.message) for s in health.signals] == [
        ("nvlink5_errors", "NVLink5 errors: 3 new in the last 30 s (symbol errors 3)")
    ]


@pytest.mark.parametrize(
    ("action", "state", "message"),
    [
        (1, GpuHealthState.FAULTED,
         "GPU recovery action: reset the GPU (stop its processes, then nvidia-smi -r)"),
        (2, GpuHealthState.FAULTED, "GPU recovery action: reboot the node"),
        (3, GpuHealthState.AT_RISK,
         "GPU recovery action: drain peer-to-peer (NVLink) work from this GPU"),
        (4, GpuHealthState.FAULTED,
         "GPU recovery action: drain peer-to-peer work, then reset the GPU"),
        (5, GpuHealthState.AT_RISK, "GPU recovery action: recover the IMEX domain"),
        (6, GpuHealthState.FAULTED, "GPU recovery action: reset the GPU's PCIe bus"),
        (7, GpuHealthState.FAULTED, "GPU recovery action: reboot the system"),
        (9, GpuHealthState.AT_RISK, "GPU recovery action 9: not known to this agent"),
    ],
    ids=["reset", "reboot", "drain-p2p", "drain-and-reset", "imex", "bus-reset",
         "system-reboot", "unknown"],
)  # fmt: skip
def test_recovery_action_is_a_health_signal(
    machine_factory: Factory, clock: FakeClock, action: int, state: GpuHealthState, message: str
) -> None:
    """The driver's recovery action (field 230) becomes a fault or an at-risk signal saying what
    to do; NONE is healthy."""
    machine = machine_factory("h100-sxm")
    machine.spec.gpu[0] = {"recovery_action": action}
    samples = NvmlBackend(FakeNvml(machine), clock=clock).sample()
    assert (samples[0].recovery_action, samples[1].recovery_action) == (action, 0)
    health = HealthTracker().update(samples[0], clock.now())
    assert (health.state, [s.message for s in health.signals]) == (state, [message])
    assert HealthTracker().update(samples[1], clock.now()).state is GpuHealthState.HEALTHY


def test_driver_without_field_values_warns_once(machine_factory: Factory, clock: FakeClock) -> None:
    """A driver that lacks nvmlDeviceGetFieldValues loses the recovery action, nothing else."""
    machine = machine_factory("h100-sxm")
    machine.spec.gpus.unsupported = ["nvmlDeviceGetFieldValues"]
    sample = NvmlBackend(FakeNvml(machine), clock=clock).sample()[0]
    assert (sample.recovery_action, sample.unavailable) == (
        None, ["nvmlDeviceGetFieldValues: Function Not Found"],
    )  # fmt: skip


def test_xids_are_counted_by_class() -> None:
    """Every Xid heard is counted by its class, and the last one is kept (for /metrics)."""
    tracker = HealthTracker()
    for xid in (13, 92, 145, 79):
        tracker.record_xid(XidEvent("GPU-a", xid, START))
    counts, last = tracker.xid_counts("GPU-a")
    assert counts == {XidClass.APPLICATION: 1, XidClass.AT_RISK: 2, XidClass.FATAL: 1}
    assert last == 79
    assert tracker.xid_counts("GPU-b") == ({}, None)


def test_nvlink5_xid_is_at_risk_until_the_recovery_action_says_more() -> None:
    """Xid 145 alone puts the GPU at risk; the reset the driver then asks for faults it."""
    tracker = HealthTracker()
    tracker.record_xid(XidEvent("GPU-a", 145, START))
    sample = GpuSample(index=0, uuid="GPU-a", vendor=Vendor.NVIDIA)
    health = tracker.update(sample, START)
    assert (health.state, [s.message for s in health.signals]) == (
        GpuHealthState.AT_RISK, ["Xid 145 (NVLink5 RLW error)"],
    )  # fmt: skip
    sample.recovery_action = pynvml.NVML_GPU_RECOVERY_ACTION_GPU_RESET
    assert tracker.update(sample, START).state is GpuHealthState.FAULTED


class RecordingNvml(FakeNvml):
    """The fake pynvml, recording each field-values call as `(NVML index, [(field, scope)])`."""

    def __init__(self, machine: FakeMachine) -> None:
        super().__init__(machine)
        self.asked: list[tuple[int, list[tuple[int, int]]]] = []

    def nvmlDeviceGetFieldValues(self, h: Any, field_ids: list[Any]) -> Any:  # noqa: N802
        self.asked.append(
            (h.index, [tuple(w) if isinstance(w, tuple) else (w, 0) for w in field_ids])
        )
        return super().nvmlDeviceGetFieldValues(h, field_ids)

    def take(self) -> list[tuple[int, list[tuple[int, int]]]]:
        asked, self.asked = self.asked, []
        return asked


NVLINK5 = frozenset(range(206, 223))


def test_one_field_call_per_gpu_asks_only_what_the_gpu_has(
    machine_factory: Factory, clock: FakeClock
) -> None:
    """The first scan asks each GPU for every field; later scans make one call per GPU with only
    the fields it answered: an H100 is not asked for NVLink5 counters again, a GB200 is."""
    lib = RecordingNvml(machine_factory("h100-sxm"))
    backend = NvmlBackend(lib, clock=clock)
    backend.sample()
    first = lib.take()
    assert any(f in NVLINK5 for _, asked in first for f, _ in asked)
    samples = backend.sample()
    later = lib.take()
    assert [index for index, _ in later] == list(range(8))  # one call per GPU
    asked = later[0][1]
    assert not any(f in NVLINK5 for f, _ in asked)
    states = [scope for f, scope in asked if f == pynvml.NVML_FI_DEV_NVLINK_GET_STATE]
    assert states == list(range(18))
    assert (samples[0].nvlinks_down, samples[0].recovery_action) == ([], 0)
    assert samples[0].counters["nvlink_crc"] == 0

    blackwell = RecordingNvml(machine_factory("gb200-nvl72-tray"))
    backend = NvmlBackend(blackwell, clock=clock)
    backend.sample()
    blackwell.take()
    backend.sample()
    asked = blackwell.take()[0][1]
    assert sum(f in NVLINK5 for f, _ in asked) == 9 * 18


def test_field_reads_match_the_per_link_calls(machine_factory: Factory, clock: FakeClock) -> None:
    """Links down and error totals read from fields are what the per-link calls say; a link
    going down does not make the totals fall (which history would take for a reset)."""
    machine = machine_factory("h100-sxm")
    machine.spec.gpu[2] = {
        "nvlinks_down": [3, 7],
        "nvlink_crc_per_min": 36,
        "nvlink_replays_per_min": 18,
    }
    lib = FakeNvml(machine)
    backend = NvmlBackend(lib, clock=clock)
    clock.advance(60)
    by_fields = backend.sample()[2]
    per_link = GpuSample(index=2, uuid=machine.gpu_uuid(2), vendor=Vendor.NVIDIA)
    backend._nvlinks(lib.nvmlDeviceGetHandleByIndex(2), per_link)
    assert by_fields.nvlinks_down == per_link.nvlinks_down == [3, 7]
    assert by_fields.counters["nvlink_crc"] == per_link.counters["nvlink_crc"] == 2
    assert by_fields.counters["nvlink_replay"] == per_link.counters["nvlink_replay"] == 1
    machine.spec_gpu(2).nvlinks_down = [0, 3, 7]  # link 0, which carries the errors, goes down
    again = backend.sample()[2]
    assert again.nvlinks_down == [0, 3, 7]
    assert again.counters["nvlink_crc"] == 2


def test_plan_is_remade_when_the_gpu_changes(machine_factory: Factory, clock: FakeClock) -> None:
    """A GPU that disappears shifts NVML's indices: the GPU now at that index is a new one and
    is asked for everything; a GPU whose link count changes is asked again too."""
    machine = machine_factory("gb200-nvl72-tray")
    lib = RecordingNvml(machine)
    backend = NvmlBackend(lib, clock=clock)
    backend.sample()
    backend.sample()
    lib.take()
    machine.remove_gpu(1)
    samples = backend.sample()
    assert [s.uuid for s in samples] == [machine.gpu_uuid(i) for i in (0, 2, 3)]
    calls = [index for index, _ in lib.take()]
    assert calls.count(0) == 1  # unchanged: one call
    assert calls.count(2) == 3  # the GPU now listed at NVML index 1 is new: asked for everything
    machine.spec_gpu(0).nvlinks = 12
    machine.spec_gpu(0).nvlinks_down = [11]
    sample = backend.sample()[0]
    assert sample.nvlinks_down == [11]
    asked = [fields for index, fields in lib.take() if index == 0]
    assert len(asked) == 4  # the old plan's call, the new plan's two probes and its read
    last = asked[-1]
    assert [s for f, s in last if f == pynvml.NVML_FI_DEV_NVLINK_GET_STATE] == list(range(12))
    assert sum(f in NVLINK5 for f, _ in last) == 9 * 12


def test_unsupported_fields_are_asked_again_after_a_while(
    machine_factory: Factory, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a GPU lacked is asked again every REPROBE_SCANS scans: NVLink5 counters that a new
    driver starts giving show up without restarting the agent."""
    monkeypatch.setattr(nvml_fields, "REPROBE_SCANS", 3)
    machine = machine_factory("h100-sxm")
    backend = NvmlBackend(FakeNvml(machine), clock=clock)
    backend.sample()
    machine.spec_gpu(0).nvlink5 = True
    seen = [("nvlink5_symbol_errors" in backend.sample()[0].counters) for _ in range(4)]
    assert seen == [False, False, True, True]


class NoLinkFields(FakeNvml):
    """A driver without the link count and link state fields (older than the per-link calls)."""

    def _field(self, gpu: Any, value: Any) -> None:
        if value.fieldId in (
            pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT,
            pynvml.NVML_FI_DEV_NVLINK_GET_STATE,
        ):
            value.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
            return
        super()._field(gpu, value)


def test_driver_without_link_fields_reads_links_by_calls(
    machine_factory: Factory, clock: FakeClock
) -> None:
    """Without the link fields the links are read by per-link calls, every scan."""
    machine = machine_factory("h100-sxm")
    machine.spec.gpu[0] = {"nvlinks_down": [5]}
    backend = NvmlBackend(NoLinkFields(machine), clock=clock)
    for _ in range(2):
        sample = backend.sample()[0]
        assert (sample.nvlinks_down, sample.counters["nvlink_replay"]) == ([5], 0)
        assert sample.recovery_action == 0


def test_fake_link_fields_agree_with_its_calls(machine_factory: Factory) -> None:
    """The fake's link fields answer as its per-link calls do: the link count, each link's
    state (INVALID_ARGUMENT past the last link), and NOT_SUPPORTED on a GPU without NVLink."""
    lib = FakeNvml(machine_factory("h100-sxm"))
    lib.nvmlInit()
    h = lib.nvmlDeviceGetHandleByIndex(0)
    count, state, past = lib.nvmlDeviceGetFieldValues(
        h,
        [
            pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT,
            (pynvml.NVML_FI_DEV_NVLINK_GET_STATE, 17),
            (pynvml.NVML_FI_DEV_NVLINK_GET_STATE, 18),
        ],
    )
    assert (count.nvmlReturn, count.value.uiVal) == (pynvml.NVML_SUCCESS, 18)
    assert state.value.uiVal == pynvml.NVML_NVLINK_STATE_ACTIVE
    assert lib.nvmlDeviceGetNvLinkState(h, 17) == pynvml.NVML_FEATURE_ENABLED
    assert past.nvmlReturn == pynvml.NVML_ERROR_INVALID_ARGUMENT
    pcie = FakeNvml(machine_factory("l40s-pcie"))
    pcie.nvmlInit()
    h = pcie.nvmlDeviceGetHandleByIndex(0)
    (count,) = pcie.nvmlDeviceGetFieldValues(h, [pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT])
    assert count.nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pcie.nvmlDeviceGetNvLinkState(h, 0)


def test_field_numbers_match_the_binding() -> None:
    """The numbers used where an older nvidia-ml-py lacks a field's name are the binding's."""
    named = [
        nvml_fields.RECOVERY_ACTION,
        nvml_fields.LINK_COUNT,
        nvml_fields.LINK_STATE,
        *nvml_fields.LINK_UP_STATES,
        *nvml_fields.NVLINK5_COUNTERS.values(),
        *(field for fields in nvml_fields.NVLINK_TOTALS.values() for field in fields),
    ]
    assert [(name, getattr(pynvml, name)) for name, _ in named] == named


def test_older_binding_without_the_names_reads_by_number(
    machine_factory: Factory, clock: FakeClock
) -> None:
    """A pynvml without the newer constants (12.535 has no recovery action or NVLink5 names)
    still reads the fields by number."""

    class OldBinding(FakeNvml):
        def __getattr__(self, name: str) -> Any:
            if name.startswith(("NVML_FI_DEV_NVLINK_COUNT_", "NVML_NVLINK_STATE_")) or name in (
                "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION",
                "NVML_FI_DEV_NVLINK_GET_STATE",
            ):
                raise AttributeError(name)
            return super().__getattr__(name)

    machine = machine_factory("gb200-nvl72-tray")
    machine.spec.gpu[1] = {"recovery_action": 3, "nvlinks_down": [4]}
    sample = NvmlBackend(OldBinding(machine), clock=clock).sample()[1]
    assert (sample.recovery_action, sample.nvlinks_down) == (3, [4])
    assert sample.counters["nvlink5_symbol_errors"] == 0


def test_gpus_met_together_are_asked_again_apart(
    machine_factory: Factory, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 8 GPUs are first asked for everything in one scan; their later full asks fall in
    different scans, so no scan pays for all of them at once."""
    monkeypatch.setattr(nvml_fields, "REPROBE_SCANS", 16)
    lib = RecordingNvml(machine_factory("h100-sxm"))
    backend = NvmlBackend(lib, clock=clock)
    backend.sample()
    lib.take()
    reasked: dict[int, list[int]] = {}
    for scan in range(1, 41):
        backend.sample()
        calls = [index for index, _ in lib.take()]
        for index in set(calls):
            if calls.count(index) > 1:
                reasked.setdefault(scan, []).append(index)
    assert {i for gpus in reasked.values() for i in gpus} == set(range(8))
    assert all(len(gpus) == 1 for gpus in reasked.values())
    assert reasked[16] == [0]  # GPU 0 waits the period alone; the others wait longer, apart
