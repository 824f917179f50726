"""`GET /metrics`: the latest scan as Prometheus text (exposition format 0.0.4).

GPU series use dcgm-exporter's names and labels where DCGM has the field (`DCGM_FI_DEV_GPU_TEMP`,
`DCGM_FI_DEV_FB_USED`, … with `gpu`, `UUID`, `pci_bus_id`, `modelName`, `Hostname`), so existing
dashboards work; the rest are `astraeus_*`. Every series is listed in docs/agent.md."""

from dataclasses import dataclass, field

from astraeus.shared import GpuHealthState, GpuInfo, MachineReport, PressureCondition

from .backends import GpuSample
from .backends.amdgpu import UNKNOWN
from .health import HealthTracker
from .health.xid import XidClass
from .inventory import Telemetry
from .topology.rdma import PORT_COUNTERS

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MIB = 1024 * 1024
Labels = dict[str, str]


@dataclass
class Family:
    name: str
    kind: str
    help: str
    samples: list[tuple[Labels, float]] = field(default_factory=list)

    def add(self, labels: Labels, value: float | int | bool | None) -> None:
        if value is not None:
            self.samples.append((labels, float(value)))

    def lines(self) -> list[str]:
        if not self.samples:
            return []
        out = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]
        out += [f"{self.name}{_labels(labels)} {_number(v)}" for labels, v in self.samples]
        return out


def render(report: MachineReport, telemetry: Telemetry, tracker: HealthTracker, scans: int) -> str:
    families = [
        *gpu_families(report, telemetry, tracker),
        *port_families(report, telemetry),
        *host_families(report, telemetry, scans),
    ]
    return "\n".join(line for family in families for line in family.lines()) + "\n"


def _f(name: str, kind: str, text: str) -> Family:
    return Family(name, kind, text)


def gpu_families(
    report: MachineReport, telemetry: Telemetry, tracker: HealthTracker
) -> list[Family]:
    temp = _f("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).")
    power = _f("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).")
    util = _f("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).")
    used = _f("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).")
    free = _f("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).")
    total = _f("DCGM_FI_DEV_FB_TOTAL", "gauge", "Framebuffer memory total (in MiB).")
    xid = _f("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.")
    replay = _f("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.")
    sbe = _f(
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "counter",
        "Total number of single-bit volatile ECC errors.",
    )
    dbe = _f(
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "counter",
        "Total number of double-bit volatile ECC errors.",
    )
    thermal = _f(
        "DCGM_FI_DEV_THERMAL_VIOLATION",
        "counter",
        "Throttling duration due to thermal constraints (in ns).",
    )
    power_v = _f(
        "DCGM_FI_DEV_POWER_VIOLATION",
        "counter",
        "Throttling duration due to power constraints (in ns).",
    )
    nvl_replay = _f(
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink retries."
    )
    nvl_recovery = _f(
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink recovery errors.",
    )
    remap_failure = _f(
        "DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed."
    )
    remap_pending = _f(
        "DCGM_FI_DEV_ROW_REMAP_PENDING", "gauge", "Whether remapping of rows is pending."
    )
    retired = _f(
        "DCGM_FI_DEV_RETIRED_PENDING",
        "gauge",
        "Whether pages are pending retirement (1) or not (0).",
    )
    recovery = _f(
        "DCGM_FI_DEV_GPU_RECOVERY_ACTION",
        "gauge",
        "GPU recovery action the driver asks for (nvmlDeviceGpuRecoveryAction_t; 0 none).",
    )
    crc = _f(
        "astraeus_gpu_nvlink_crc_errors_total",
        "counter",
        "NVLink CRC errors (flit and data), all links.",
    )
    nvl5 = _f(
        "astraeus_gpu_nvlink5_errors_total",
        "counter",
        "NVLink5 error counters summed over links, by counter.",
    )
    health = _f(
        "astraeus_gpu_health",
        "gauge",
        "1 for the GPU's health state (healthy, at_risk, faulted), 0 for the others.",
    )
    signal = _f(
        "astraeus_gpu_signal",
        "gauge",
        "1 for each signal that puts the GPU at risk or faults it, by kind.",
    )
    xids = _f(
        "astraeus_gpu_xid_events_total",
        "counter",
        "Xid events since the agent started, by class (fatal, at_risk, application).",
    )
    for gpu in report.gpus:
        labels = _gpu_labels(gpu, report.name)
        sample = telemetry.samples.get(gpu.uuid)
        for state in GpuHealthState:
            health.add({**labels, "state": state.value}, gpu.health.state is state)
        for sig in gpu.health.signals:
            signal.add({**labels, "kind": sig.kind}, 1)
        counts, last = tracker.xid_counts(gpu.uuid)
        for kind in XidClass:
            xids.add({**labels, "class": kind.value}, counts.get(kind, 0))
        xid.add(labels, last)
        total.add(labels, gpu.memory_bytes / MIB if gpu.memory_bytes else None)
        if sample is None or sample.lost:
            continue
        temp.add(labels, sample.temperature_c)
        power.add(labels, sample.power_watts)
        util.add(labels, sample.utilization_percent)
        if sample.memory_used_bytes is not None:
            used.add(labels, sample.memory_used_bytes / MIB)
            free.add(labels, max(0, gpu.memory_bytes - sample.memory_used_bytes) / MIB)
        c = sample.counters
        replay.add(labels, c.get("pcie_replays"))
        sbe.add(labels, c.get("ecc_corrected"))
        thermal.add(labels, c.get("thermal_ns"))
        power_v.add(labels, c.get("power_ns"))
        nvl_replay.add(labels, c.get("nvlink_replay"))
        nvl_recovery.add(labels, c.get("nvlink_recovery"))
        crc.add(labels, c.get("nvlink_crc"))
        for key in sorted(k for k in c if k.startswith("nvlink5_")):
            nvl5.add({**labels, "counter": key.removeprefix("nvlink5_")}, c[key])
        _states(sample, labels, dbe, remap_failure, remap_pending, retired, recovery)
    return [temp, power, util, used, free, total, xid, replay, sbe, dbe, thermal, power_v,
            nvl_replay, nvl_recovery, remap_failure, remap_pending, retired, recovery, crc, nvl5,
            health, signal, xids]  # fmt: skip


def _states(sample: GpuSample, labels: Labels, *families: Family) -> None:
    dbe, remap_failure, remap_pending, retired, recovery = families
    if "ecc_corrected" in sample.counters:  # the backend reads ECC at all
        dbe.add(labels, sample.ecc_uncorrected)
    if UNKNOWN not in sample.unavailable:  # AMD without AMD SMI cannot say
        remap_failure.add(labels, sample.remap_failure)
        remap_pending.add(labels, sample.remap_pending)
        retired.add(labels, sample.retired_pending)
    recovery.add(labels, sample.recovery_action)


def _gpu_labels(gpu: GpuInfo, host: str) -> Labels:
    return {
        "gpu": str(gpu.index),
        "UUID": gpu.uuid,
        "pci_bus_id": gpu.pci_bus_id or "",
        "modelName": gpu.model,
        "Hostname": host,
    }


def port_families(report: MachineReport, telemetry: Telemetry) -> list[Family]:
    up = _f("astraeus_rdma_port_up", "gauge", "1 when the RDMA port's state is ACTIVE.")
    info = _f(
        "astraeus_rdma_port_info",
        "gauge",
        "The RDMA port's state, physical state and link layer, as labels; always 1.",
    )
    rate = _f("astraeus_rdma_port_rate_gbps", "gauge", "The RDMA port's rate (in Gb/s).")
    at_risk = _f("astraeus_rdma_port_at_risk", "gauge", "1 while the RDMA port is at risk.")
    errors = _f(
        "astraeus_rdma_port_errors_total",
        "counter",
        "The RDMA port's error counters (sysfs counters/), by counter.",
    )
    for port in report.rdma_ports:
        labels = {"device": port.device, "port": str(port.port), "Hostname": report.name}
        up.add(labels, port.up)
        info.add(
            {**labels, "state": port.state, "physical_state": port.physical_state or "",
             "link_layer": "Omni-Path" if port.omni_path else port.link_layer.value},
            1,
        )  # fmt: skip
        rate.add(labels, port.rate_gbps)
        at_risk.add(labels, port.at_risk)
        counters = telemetry.port_counters.get(port.hca_name, {})
        for name in PORT_COUNTERS:
            errors.add({**labels, "counter": name}, counters.get(name))
    return [up, info, rate, at_risk, errors]


def host_families(report: MachineReport, telemetry: Telemetry, scans: int) -> list[Family]:
    host, labels = telemetry.host, {"Hostname": report.name}
    cores = _f(
        "astraeus_host_cpu_cores",
        "gauge",
        "Allocatable cores: online CPUs capped by the agent's cgroup CPU quota.",
    )
    online = _f("astraeus_host_cpu_online", "gauge", "CPUs online.")
    load = _f("astraeus_host_load1", "gauge", "1-minute load average.")
    memory = _f("astraeus_host_memory_bytes", "gauge", "Memory total (in bytes).")
    available = _f(
        "astraeus_host_memory_available_bytes",
        "gauge",
        "Memory available (MemAvailable, or the kernel's estimate where it is missing).",
    )
    estimated = _f(
        "astraeus_host_memory_available_estimated",
        "gauge",
        "1 when available memory is the agent's estimate (no MemAvailable).",
    )
    psi = _f(
        "astraeus_host_pressure_avg10_percent",
        "gauge",
        "Pressure stall information, avg10 (in %), by resource and kind.",
    )
    condition = _f(
        "astraeus_host_condition",
        "gauge",
        "1 while the pressure condition holds (kubelet's thresholds), by condition.",
    )
    cpu_pressure = _f(
        "astraeus_host_cpu_pressure",
        "gauge",
        "1 while CPU pressure (PSI some avg10) is at or above 50 %.",
    )
    disk = _f(
        "astraeus_host_data_free_bytes",
        "gauge",
        "Free space at the agent's data directory (in bytes).",
    )
    pids = _f("astraeus_host_processes", "gauge", "Processes and threads.")
    scans_total = _f(
        "astraeus_agent_scans_total", "counter", "Scans the agent has made since it started."
    )
    cores.add(labels, report.cpu_cores)
    online.add(labels, host.cpu.online)
    load.add(labels, host.load1)
    memory.add(labels, report.memory_bytes)
    available.add(labels, report.free_memory_bytes)
    estimated.add(labels, host.memory_estimated)
    for resource, lines in sorted(host.psi.items()):
        for kind, values in sorted(lines.items()):
            psi.add({**labels, "resource": resource, "kind": kind}, values.get("avg10"))
    for cond in PressureCondition:
        condition.add({**labels, "condition": cond.value}, cond in report.conditions)
    cpu_pressure.add(labels, report.cpu_pressure)
    disk.add(labels, report.data_free_bytes)
    pids.add(labels, host.processes)
    scans_total.add(labels, scans)
    return [cores, online, load, memory, available, estimated, psi, condition, cpu_pressure,
            disk, pids, scans_total]  # fmt: skip


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() and abs(value) < 2**63 else repr(value)
