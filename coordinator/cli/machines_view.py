"""Text for machines: the `machines` table and one machine's page."""

from __future__ import annotations

from collections import Counter

from astraeus.coordinator.api.views import MachineDetail
from astraeus.shared import GpuHealthState, LinkLayer
from astraeus.shared.labels import FABRIC, RACK, SITE

from .render import table

GIB = 1024**3


def state_text(machine: MachineDetail) -> str:
    """`Up`, `Down`, `Up, cordoned`, `Up, MemoryPressure`."""
    parts = [machine.state]
    if machine.cordoned:
        parts.append("cordoned")
    if machine.report is not None:
        parts += [condition.value for condition in machine.report.conditions]
    return ", ".join(parts)


def gpus_text(machine: MachineDetail) -> str:
    """Free/total by model: `6/8 NVIDIA H100 80GB HBM3`; free excludes faulted and held GPUs."""
    total: Counter[str] = Counter()
    free: Counter[str] = Counter()
    for gpu in machine.gpus:
        total[gpu.model] += 1
        if gpu.task is None and gpu.health != GpuHealthState.FAULTED.value:
            free[gpu.model] += 1
    return ", ".join(f"{free[model]}/{count} {model}" for model, count in total.items()) or "-"


def health_text(machine: MachineDetail) -> str:
    """`8 healthy`, or `6 healthy, 2 at risk`; `-` without GPUs."""
    counts = Counter(gpu.health for gpu in machine.gpus)
    order = [state.value for state in GpuHealthState]
    return ", ".join(f"{counts[s]} {s.replace('_', ' ')}" for s in order if counts[s]) or "-"


def fabric_text(machine: MachineDetail) -> str:
    """The fabric label, else the NVLink domain, else what the ports say (InfiniBand, RoCE),
    else Ethernet."""
    if FABRIC in machine.labels:
        return machine.labels[FABRIC]
    domains = (
        sorted({g.nvlink_domain for g in machine.report.gpus if g.nvlink_domain})
        if machine.report
        else []
    )
    if domains:
        cluster, _, clique = domains[0].partition("/")
        return f"NVLink {cluster[:8]}/{clique}"
    ports = machine.report.rdma_ports if machine.report else []
    layers = {port.link_layer for port in ports if port.state == "ACTIVE"}
    if LinkLayer.INFINIBAND in layers:
        named = sorted({port.fabric for port in ports if port.fabric})
        return f"InfiniBand {named[0]}" if named else "InfiniBand"
    return "RoCE" if layers else "Ethernet"


def machine_rows(machines: list[MachineDetail]) -> list[str]:
    rows = [["NAME", "STATE", "GPUS FREE/TOTAL", "HEALTH", "FABRIC", "RACK", "SITE"]]
    for m in machines:
        rows.append(
            [
                m.name,
                state_text(m),
                gpus_text(m),
                health_text(m),
                fabric_text(m),
                m.labels.get(RACK, "-"),
                m.labels.get(SITE) or m.site or "-",
            ]
        )
    return table(rows)


def machine_page(m: MachineDetail) -> list[str]:
    """Everything `machine NAME` shows: state, room, GPUs with health, ports, labels."""
    lines = [
        f"{m.name}: {state_text(m)}" + (f" — {m.cordon_reason}" if m.cordon_reason else ""),
        f"  last seen   {m.last_seen.isoformat() if m.last_seen else 'never'}",
        f"  cores       {m.cpu_cores_allocated:g} of {m.cpu_cores:g} allocated",
        f"  memory      {m.memory_bytes_allocated / GIB:.0f} of {m.memory_bytes / GIB:.0f} GiB"
        " allocated",
        f"  GPUs        {gpus_text(m)} free ({health_text(m)})",
        f"  fabric      {fabric_text(m)}",
        f"  runs        {', '.join(m.runs) or '-'}",
    ]
    lines += [f"  label       {key}={value}" for key, value in sorted(m.labels.items())]
    signals = signals_of(m)
    rows = [
        [f"gpu {g.index}", g.model, g.health, g.task or "-", signals.get(g.uuid, "")]
        for g in m.gpus
    ]
    lines += table(rows, indent="  ")
    for port in m.report.rdma_ports if m.report else []:
        lines.append(
            f"  port {port.device}/{port.port}  {port.link_layer.value}  {port.state}"
            f"  {port.rate_gbps:g} Gb/s" + ("  at risk" if port.at_risk else "")
        )
    for r in m.reservations:
        what = ", ".join(f"{k}={v}" for k, v in r.labels.items()) or f"workspace {r.workspace}"
        lines.append(f"  reserved    #{r.id} for {what}")
    return lines


def signals_of(m: MachineDetail) -> dict[str, str]:
    if m.report is None:
        return {}
    return {
        gpu.uuid: "; ".join(signal.message for signal in gpu.health.signals)
        for gpu in m.report.gpus
    }
