"""The health tracker: faults, at-risk signals over windows, clearing, and remembering faults."""

from datetime import timedelta
from pathlib import Path

from astraeus.agent.backends import FabricSample, GpuSample, XidEvent
from astraeus.agent.health import HealthPolicy, HealthTracker
from astraeus.agent.health.signals import pcie_replay_limit
from astraeus.shared import GpuHealthState, Vendor
from astraeus.shared.clock import FakeClock

from .conftest import START

UUID = "GPU-0000"


def _sample(**fields: object) -> GpuSample:
    counters = fields.pop("counters", {})
    sample = GpuSample(index=0, uuid=UUID, vendor=Vendor.NVIDIA, pcie_gen=5, pcie_width=16)
    sample.counters = dict(counters)  # type: ignore[call-overload]
    for key, value in fields.items():
        setattr(sample, key, value)
    return sample


def _messages(health: object) -> list[str]:
    return [s.message for s in health.signals]  # type: ignore[attr-defined]


def test_pcie_limits_follow_dcgm() -> None:
    """DCGM's per-lane rates give 31/min for Gen5 x16 and 16/min for Gen4 x16."""
    assert (pcie_replay_limit(5, 16), pcie_replay_limit(4, 16), pcie_replay_limit(7, 16)) == (
        31, 16, 62,
    )  # fmt: skip


def test_pcie_replays_need_a_minute_then_say_the_rate(clock: FakeClock) -> None:
    """Replays at 41/min are at risk only once a minute of samples exists, in words."""
    tracker = HealthTracker()
    assert tracker.update(_sample(counters={"pcie_replays": 0}), clock.now()).state == "healthy"
    clock.advance(30)
    assert tracker.update(_sample(counters={"pcie_replays": 20}), clock.now()).state == "healthy"
    clock.advance(30)
    health = tracker.update(_sample(counters={"pcie_replays": 41}), clock.now())
    assert health.state == GpuHealthState.AT_RISK
    assert _messages(health) == ["PCIe replays: 41/min, above 31/min for Gen5 x16"]
    assert health.signals[0].kind == "pcie_replay"


def test_replays_at_the_limit_are_fine(clock: FakeClock) -> None:
    """31/min on Gen5 x16 is the limit itself, not above it."""
    tracker = HealthTracker()
    tracker.update(_sample(counters={"pcie_replays": 0}), clock.now())
    clock.advance(60)
    assert tracker.update(_sample(counters={"pcie_replays": 31}), clock.now()).state == "healthy"


def test_at_risk_clears_after_a_quiet_window(clock: FakeClock) -> None:
    """A correctable-ECC signal stays while errors grow and clears after the quiet window."""
    tracker = HealthTracker(HealthPolicy(quiet_seconds=300))
    tracker.update(_sample(counters={"ecc_corrected": 0}), clock.now())
    clock.advance(10)
    health = tracker.update(_sample(counters={"ecc_corrected": 4}), clock.now())
    assert _messages(health) == ["Correctable ECC errors: 4 new in the last 10 s"]
    since = health.signals[0].since
    for _ in range(4):  # quiet: no growth, but still within the quiet window
        clock.advance(60)
        health = tracker.update(_sample(counters={"ecc_corrected": 4}), clock.now())
    assert health.state == GpuHealthState.AT_RISK
    assert health.signals[0].since == since
    clock.advance(61)
    assert tracker.update(_sample(counters={"ecc_corrected": 4}), clock.now()).state == "healthy"


def test_nvlink_and_throttle_growth_are_at_risk(clock: FakeClock) -> None:
    """NVLink replay and CRC growth and thermal throttling time each give a signal."""
    tracker = HealthTracker()
    zero = {"nvlink_replay": 0, "nvlink_crc": 0, "thermal_ns": 0, "power_ns": 0}
    tracker.update(_sample(counters=zero), clock.now())
    clock.advance(60)
    grown = {"nvlink_replay": 2, "nvlink_crc": 150, "thermal_ns": 12e9, "power_ns": 0}
    assert _messages(tracker.update(_sample(counters=grown), clock.now())) == [
        "NVLink CRC errors: 150 new in the last 60 s",
        "NVLink replay errors: 2 new in the last 60 s",
        "Thermal throttling: 12 s of the last 60 s",
    ]


def test_states_pending_remap_down_links_and_fabric(clock: FakeClock) -> None:
    """A pending remap or retirement, down NVLinks and a degraded fabric are at-risk signals."""
    fabric = FabricSample("u", 1, True, True, ["NVLink fabric bandwidth degraded"])
    sample = _sample(remap_pending=True, retired_pending=True, nvlinks_down=[3, 7], fabric=fabric)
    assert _messages(HealthTracker().update(sample, clock.now())) == [
        "NVLink fabric bandwidth degraded",
        "NVLink links down: 3, 7",
        "Page retirement pending: reload the driver or reboot at the next opportunity",
        "Row remap pending: reset the GPU at the next opportunity",
    ]


def test_faults_from_a_sample(clock: FakeClock) -> None:
    """Uncorrectable ECC, a failed remap and a lost GPU fault it, with what to do."""
    sample = _sample(ecc_uncorrected=3, remap_failure=True)
    health = HealthTracker().update(sample, clock.now())
    assert health.state == GpuHealthState.FAULTED
    assert _messages(health) == [
        "Uncorrectable ECC errors: 3 since the driver loaded; drain the GPU and reset it or "
        "reboot the node",
        "Row remapping failed: reset the GPU or reboot the node immediately",
    ]
    lost = _sample(lost=True, unavailable=["GPU is lost"])
    assert _messages(HealthTracker().update(lost, clock.now())) == [
        "GPU is lost: the GPU has fallen off the bus or cannot be reached"
    ]


def test_xid_classes_drive_health(clock: FakeClock) -> None:
    """An application Xid is ignored, an at-risk one marks the GPU at risk, a fatal one faults."""
    tracker = HealthTracker()
    tracker.record_xid(XidEvent(UUID, 13, clock.now()))
    assert tracker.update(_sample(), clock.now()).state == "healthy"
    tracker.record_xid(XidEvent(UUID, 92, clock.now()))
    health = tracker.update(_sample(), clock.now())
    assert (health.state, _messages(health)) == (
        GpuHealthState.AT_RISK, ["Xid 92 (high single-bit ECC error rate)"],
    )  # fmt: skip
    assert health.signals[0].kind == "xid"
    tracker.record_xid(XidEvent(UUID, 79, clock.now()))
    health = tracker.update(_sample(), clock.now())
    assert _messages(health) == [
        "Xid 79 (GPU has fallen off the bus): reset the GPU or reboot the node"
    ]


def test_fatal_xid_lasts_until_revalidated(clock: FakeClock) -> None:
    """A fatal Xid keeps the GPU faulted however long it is quiet, until re-validated."""
    tracker = HealthTracker()
    tracker.record_xid(XidEvent(UUID, 48, clock.now()))
    clock.advance(86_400)
    assert tracker.update(_sample(), clock.now()).state == GpuHealthState.FAULTED
    assert tracker.revalidate(UUID) is True
    assert tracker.update(_sample(), clock.now()).state == GpuHealthState.HEALTHY
    assert tracker.revalidate(UUID) is False


def test_a_reset_clears_fatal_xids(clock: FakeClock) -> None:
    """Counters starting again from zero mean the GPU was reset, which clears its Xid faults."""
    tracker = HealthTracker()
    tracker.update(_sample(counters={"pcie_replays": 500}), clock.now())
    tracker.record_xid(XidEvent(UUID, 79, clock.now()))
    clock.advance(5)
    assert tracker.update(_sample(counters={"pcie_replays": 500}), clock.now()).state == "faulted"
    clock.advance(5)
    assert tracker.update(_sample(counters={"pcie_replays": 0}), clock.now()).state == "healthy"


def test_fatal_xids_survive_an_agent_restart(tmp_path: Path, clock: FakeClock) -> None:
    """Fatal Xid faults are saved, so a new tracker over the same file still faults the GPU."""
    state = tmp_path / "faults.json"
    HealthTracker(state_file=state).record_xid(XidEvent(UUID, 95, START))
    health = HealthTracker(state_file=state).update(_sample(), clock.now() + timedelta(hours=1))
    assert health.state == GpuHealthState.FAULTED
    assert health.signals[0].since == START


def test_missing_gpu_is_faulted(clock: FakeClock) -> None:
    """A GPU that was there and is no longer listed is faulted, saying where it was."""
    health = HealthTracker().missing(UUID, "0000:18:00.0", clock.now())
    assert _messages(health) == [
        "GPU missing: it was at 0000:18:00.0 and the driver no longer lists it"
    ]


def test_reset_required_is_a_fault(clock: FakeClock) -> None:
    """NVML's `GPU requires restart` faults the GPU with what to do."""
    health = HealthTracker().update(_sample(reset_required=True), clock.now())
    assert health.state == GpuHealthState.FAULTED
    assert _messages(health) == ["GPU requires reset: reset the GPU or reboot the node"]
