"""At-risk signals from the growth of a GPU's counters over one window (docs/hardware.md §3), in
words a person can act on. Pure functions: the tracker owns the history."""

import math
from dataclasses import dataclass

from astraeus.agent.backends import GpuSample

HW_SLOWDOWN_REASONS = {
    0x008: "HW slowdown",
    0x040: "HW thermal slowdown",
    0x080: "HW power brake",
}
"""Clock event reason bits that say the hardware itself cut the clocks (docs/hardware.md §1.9)."""

PCIE_REPLAYS_PER_LANE_PER_MIN = (0.15, 0.3, 0.48, 0.96, 1.92, 3.84)
"""DCGM `MonitorPcie`: errors per minute per lane for Gen1..Gen6 (BER 1e-12 × line rate × 60)."""


@dataclass(frozen=True)
class HealthPolicy:
    """Thresholds; the defaults are DCGM's where DCGM has one (docs/agent.md)."""

    window_seconds: float = 60.0
    """DCGM's watches look at the last minute and need a minute of samples for rates."""
    quiet_seconds: float = 600.0
    """An at-risk signal clears after this long without recurring."""
    ecc_corrected_per_window: int = 1
    nvlink_errors_per_window: int = 1
    nvlink_crc_per_window: int = 1
    nvlink5_errors_per_window: int = 1
    """NVLink5 (Blackwell) error counters summed; DCGM fails on any growth."""
    throttle_seconds_per_window: float = 0.0
    """Throttled longer than this within the window is at risk; DCGM warns on any."""


@dataclass(frozen=True)
class Window:
    """The counters at the start and end of the window, and the seconds between."""

    first: dict[str, float]
    last: dict[str, float]
    seconds: float

    def growth(self, key: str) -> float | None:
        if key not in self.first or key not in self.last:
            return None
        return self.last[key] - self.first[key]


def pcie_replay_limit(gen: int, width: int) -> int:
    """Replays per minute above which a link is at risk: Gen5 x16 → 31, Gen4 x16 → 16."""
    per_lane = PCIE_REPLAYS_PER_LANE_PER_MIN[min(max(gen, 1), 6) - 1]
    return math.ceil(per_lane * width)


def counter_signals(sample: GpuSample, window: Window, policy: HealthPolicy) -> dict[str, str]:
    """`{kind: message}` for every counter that grew past its threshold in the window."""
    found: dict[str, str] = {}
    span = _seconds(window.seconds)
    grown = window.growth("ecc_corrected")
    if grown is not None and grown >= policy.ecc_corrected_per_window:
        found["ecc_correctable"] = f"Correctable ECC errors: {grown:.0f} new in the last {span}"
    pcie = _pcie(sample, window, policy)
    if pcie:
        found["pcie_replay"] = pcie
    for key, label, limit in (
        ("nvlink_replay", "NVLink replay errors", policy.nvlink_errors_per_window),
        ("nvlink_recovery", "NVLink recovery errors", policy.nvlink_errors_per_window),
        ("nvlink_crc", "NVLink CRC errors", policy.nvlink_crc_per_window),
    ):
        grown = window.growth(key)
        if grown is not None and grown >= limit:
            found[key] = f"{label}: {grown:.0f} new in the last {span}"
    nvlink5 = _nvlink5(window, policy)
    if nvlink5:
        found["nvlink5_errors"] = nvlink5
    for key, label in (("thermal_ns", "Thermal"), ("power_ns", "Power")):
        grown = window.growth(key)
        if grown is not None and grown / 1e9 > policy.throttle_seconds_per_window:
            kind = label.lower() + "_throttle"
            found[kind] = f"{label} throttling: {_seconds(grown / 1e9)} of the last {span}"
            found[kind] += _now_active(sample.clock_event_reasons)
    return found


def _nvlink5(window: Window, policy: HealthPolicy) -> str | None:
    """`NVLink5 errors: 3 new in the last 60 s (symbol errors 2, rcv errors 1)`."""
    grown = {
        key.removeprefix("nvlink5_").replace("_", " "): window.growth(key) or 0.0
        for key in sorted(window.last)
        if key.startswith("nvlink5_")
    }
    total = sum(grown.values())
    if total <= 0 or total < policy.nvlink5_errors_per_window:
        return None
    parts = ", ".join(f"{name} {n:.0f}" for name, n in grown.items() if n)
    return f"NVLink5 errors: {total:.0f} new in the last {_seconds(window.seconds)} ({parts})"


RECOVERY_ACTIONS = {
    1: (True, "reset the GPU (stop its processes, then nvidia-smi -r)"),
    2: (True, "reboot the node"),
    3: (False, "drain peer-to-peer (NVLink) work from this GPU"),
    4: (True, "drain peer-to-peer work, then reset the GPU"),
    5: (False, "recover the IMEX domain"),
    6: (True, "reset the GPU's PCIe bus"),
    7: (True, "reboot the system"),
}
"""NVML's `NVML_GPU_RECOVERY_ACTION_*` → (faults the GPU, what to do). As DCGM: reset, reboot
and drain-and-reset fail the GPU, drain-P2P warns; bus reset and system reboot (newer drivers)
fault too; recovering the IMEX domain leaves the GPU usable on its own, so it is at risk."""


def recovery_signal(action: int | None) -> tuple[bool, str] | None:
    """(faults the GPU, message) for the driver's recovery action; None when it asks nothing."""
    if not action:
        return None
    fatal, what = RECOVERY_ACTIONS.get(action, (False, "not known to this agent"))
    label = f"GPU recovery action {action}" if action not in RECOVERY_ACTIONS else ""
    return fatal, f"{label or 'GPU recovery action'}: {what}"


def _now_active(reasons: int | None) -> str:
    """` (HW thermal slowdown now)` when the clocks are being cut by the hardware right now."""
    active = [name for bit, name in HW_SLOWDOWN_REASONS.items() if reasons and reasons & bit]
    return f" ({', '.join(active)} now)" if active else ""


def state_signals(sample: GpuSample) -> dict[str, str]:
    """At-risk states a single sample shows."""
    found: dict[str, str] = {}
    if sample.remap_pending:
        found["row_remap_pending"] = "Row remap pending: reset the GPU at the next opportunity"
    if sample.retired_pending:
        found["page_retirement_pending"] = (
            "Page retirement pending: reload the driver or reboot at the next opportunity"
        )
    if sample.nvlinks_down:
        links = ", ".join(str(link) for link in sample.nvlinks_down)
        found["nvlink_down"] = f"NVLink links down: {links}"
    if sample.fabric is not None and sample.fabric.problems:
        found["fabric_health"] = "; ".join(sample.fabric.problems)
    recovery = recovery_signal(sample.recovery_action)
    if recovery is not None and not recovery[0]:
        found["recovery_action"] = recovery[1]
    return found


def fault_signals(sample: GpuSample) -> dict[str, str]:
    """Faults a single sample shows: they last as long as the sample shows them."""
    found: dict[str, str] = {}
    if sample.lost:
        why = sample.unavailable[-1] if sample.unavailable else "GPU is lost"
        found["lost"] = f"{why}: the GPU has fallen off the bus or cannot be reached"
    if sample.reset_required:
        found["reset_required"] = "GPU requires reset: reset the GPU or reboot the node"
    if sample.ecc_uncorrected > 0:
        found["ecc_uncorrectable"] = (
            f"Uncorrectable ECC errors: {sample.ecc_uncorrected} since the driver loaded; "
            "drain the GPU and reset it or reboot the node"
        )
    if sample.remap_failure:
        found["row_remap_failure"] = (
            "Row remapping failed: reset the GPU or reboot the node immediately"
        )
    recovery = recovery_signal(sample.recovery_action)
    if recovery is not None and recovery[0]:
        found["recovery_action"] = recovery[1]
    return found


def _pcie(sample: GpuSample, window: Window, policy: HealthPolicy) -> str | None:
    grown = window.growth("pcie_replays")
    if grown is None or window.seconds < policy.window_seconds or not sample.pcie_gen:
        return None
    width = sample.pcie_width or 16
    rate = grown / (window.seconds / 60)
    limit = pcie_replay_limit(sample.pcie_gen, width)
    if rate <= limit:
        return None
    return f"PCIe replays: {rate:.0f}/min, above {limit}/min for Gen{sample.pcie_gen} x{width}"


def _seconds(seconds: float) -> str:
    return f"{seconds:.0f} s"
