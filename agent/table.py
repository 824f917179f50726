"""`astraeus-agent inspect` as text: the machine report in a few aligned tables."""

from collections.abc import Sequence

from astraeus.shared import MachineReport
from astraeus.shared.sizes import size_text

GIB = 1024**3


def _gib(value: int | None) -> str:
    return "-" if value is None else f"{value / GIB:.0f} GiB"


def _size(value: int | None) -> str:
    """`88.8 TiB`: disks and drives run to petabytes, where whole GiB stop being readable."""
    return "-" if value is None else size_text(value)


def _columns(header: Sequence[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [list(header), *rows]) for i in range(len(header))]
    return [
        "  " + "  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in [list(header), *rows]
    ]


def render(
    report: MachineReport, warnings: Sequence[str] = (), workers: str = "", gpu_workers: str = ""
) -> str:
    lines = [f"Machine {report.name} (schema {report.schema_version})"]
    conditions = ", ".join(c.value for c in report.conditions) or "none"
    lines.append(
        f"Host: {report.cpu_cores:g} cores, {_gib(report.memory_bytes)} memory "
        f"({_gib(report.free_memory_bytes)} available), {_size(report.data_free_bytes)} free "
        f"at the data directory; pressure: {conditions}; CPU pressure: "
        f"{'yes' if report.cpu_pressure else 'no'}"
    )
    if report.labels:
        lines.append("Labels: " + ", ".join(f"{k}={v}" for k, v in sorted(report.labels.items())))
    lines += _gpus(report)
    lines += _ports(report)
    lines.append(_interfaces(report))
    lines.append(_drives(report))
    state = "available" if report.imex.available else "not available"
    lines.append(f"IMEX: {state} ({report.imex.detail})")
    if workers:
        lines.append(f"Workers: {workers.removeprefix('workers ')}")
    if gpu_workers:
        lines.append(f"GPU workers: {gpu_workers}")
    lines += [f"Warning: {w}" for w in warnings]
    return "\n".join(lines) + "\n"


def _gpus(report: MachineReport) -> list[str]:
    backend = report.gpu_backend
    if not report.gpus:
        return [f"GPUs: none ({backend.detail})"]
    lines = [f"GPUs: {len(report.gpus)} ({backend.name}: {backend.detail})"]
    header = ("IDX", "MODEL", "MEMORY", "PCI", "NUMA", "HEALTH", "NVLINK DOMAIN", "UUID")
    rows = []
    for g in report.gpus:
        domain = g.nvlink_domain or (f"xgmi {g.xgmi_hive}" if g.xgmi_hive else "-")
        numa = "-" if g.numa_node is None else str(g.numa_node)
        rows.append([str(g.index), g.model, _gib(g.memory_bytes), g.pci_bus_id or "-", numa,
                     g.health.state.value, domain, g.uuid])  # fmt: skip
    table = _columns(header, rows)
    lines.append(table[0])
    for g, line in zip(report.gpus, table[1:], strict=True):
        lines.append(line)
        lines += [f"      - {s.message}" for s in g.health.signals]
    return lines


def _ports(report: MachineReport) -> list[str]:
    if not report.rdma_ports:
        return ["RDMA ports: none"]
    header = ("PORT", "STATE", "PHYSICAL", "LINK LAYER", "RATE", "FABRIC", "NUMA", "PCI", "NETDEV")
    rows = [
        [p.hca_name, p.state, p.physical_state or "-",
         "Omni-Path" if p.omni_path else p.link_layer.value, f"{p.rate_gbps:g} Gb/s",
         p.fabric or "-", "-" if p.numa_node is None else str(p.numa_node), p.pci_device or "-",
         p.netdev or "-"]
        for p in report.rdma_ports
    ]  # fmt: skip
    return [f"RDMA ports: {len(report.rdma_ports)}", *_columns(header, rows)]


def _interfaces(report: MachineReport) -> str:
    """`Network: eth0 (up, 1 Gb/s, 10.0.0.5), ib0 (up, infiniband)`."""
    parts = []
    for i in report.network_interfaces:
        facts = [i.state] + ([f"{i.speed_mbps / 1000:g} Gb/s"] if i.speed_mbps else [])
        facts += [] if i.kind == "ethernet" else [i.kind]
        parts.append(f"{i.name} ({', '.join(facts + i.ipv4 + i.ipv6)})")
    return "Network: " + (", ".join(parts) or "none")


def _drives(report: MachineReport) -> str:
    """`Drives: datasets /mnt/data (network, 88.8 TiB, 12 TiB free), scratch /x (not reachable)`."""
    parts = []
    for d in report.drives:
        facts = [] if d.local else ["network"]
        if d.reachable:
            facts += [size_text(d.capacity_bytes), f"{size_text(d.free_bytes)} free"]
        else:
            facts.append("not reachable")
        parts.append(f"{d.name} {d.path or '-'} ({', '.join(facts)})")
    return "Drives: " + (", ".join(parts) or "none")
