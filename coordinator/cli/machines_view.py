"""Text for machines: the `machines` table and one machine's page, from the API's JSON as it
comes (`MachineView`, `MachineDetail` of `shared/machines.py`, field for field)."""

from __future__ import annotations

from astraeus.shared.labels import SITE

from .render import Answer, table, when

GIB = 1024**3
NO_ADDRESS = (
    "none usable: set advertise_address on its agent (workers of runs led here get its name as"
    " MASTER_ADDR)"
)
HEALTH_STATES = ("healthy", "at_risk", "faulted")
"""`GpuHealthState`'s values in its order (`shared/report.py`; a test keeps the two the same):
the keys of a machine's `gpu_health` counts."""
INFINIBAND = "InfiniBand"
"""`LinkLayer.INFINIBAND`'s value (`shared/report.py`)."""


def state_text(machine: Answer) -> str:
    """`Up`, `Down`, `Up, cordoned`, `Up, MemoryPressure`."""
    parts = [machine["state"]]
    if machine["cordoned"]:
        parts.append("cordoned")
    if machine["state"] == "Up" and not machine["address"]:
        parts.append("no address")
    return ", ".join(parts + machine["conditions"])


def gpus_text(machine: Answer) -> str:
    """Free/total by model: `6/8 NVIDIA H100 80GB HBM3`; free is what a run could be given now
    (neither faulted nor held, on a machine that takes runs). Idle GPUs that no run can use now
    (the machine is Down, cordoned or under pressure; the state says which) are shown apart:
    `0/8 NVIDIA H100 80GB HBM3 (8 idle)`."""
    return ", ".join(_model_text(count) for count in machine["gpu_models"]) or "-"


def _model_text(count: Answer) -> str:
    idle = f" ({count['idle']} idle)" if count["idle"] > count["free"] else ""
    return f"{count['free']}/{count['total']} {count['model']}{idle}"


def health_text(machine: Answer) -> str:
    """`8 healthy`, or `6 healthy, 2 at risk`; `-` without GPUs."""
    counts = machine["gpu_health"]
    shown = (f"{counts[s]} {s.replace('_', ' ')}" for s in HEALTH_STATES if counts[s])
    return ", ".join(shown) or "-"


def fabric_text(machine: Answer) -> str:
    """The fabric label, else the NVLink domain, else what the ports say (InfiniBand, RoCE),
    else Ethernet."""
    if machine["fabric"]:
        return str(machine["fabric"])
    if machine["nvlink_domains"]:
        cluster, _, clique = machine["nvlink_domains"][0].partition("/")
        return f"NVLink {cluster[:8]}/{clique}"
    if INFINIBAND in machine["rdma_link_layers"]:
        named = machine["rdma_fabrics"]
        return f"InfiniBand {named[0]}" if named else "InfiniBand"
    return "RoCE" if machine["rdma_link_layers"] else "Ethernet"


def speed_text(mbps: int | None) -> str:
    """`100 Gb/s`, `2.5 Gb/s`, `100 Mb/s`; `-` when unknown."""
    if mbps is None:
        return "-"
    return f"{mbps / 1000:g} Gb/s" if mbps >= 1000 else f"{mbps} Mb/s"


def machine_rows(machines: list[Answer]) -> list[str]:
    rows = [["NAME", "STATE", "GPUS FREE/TOTAL", "HEALTH", "FABRIC", "ETHERNET", "RACK", "SITE"]]
    for m in machines:
        rows.append(
            [
                m["name"],
                state_text(m),
                gpus_text(m),
                health_text(m),
                fabric_text(m),
                speed_text(m["ethernet_mbps"]),
                m["rack"] or "-",
                m["labels"].get(SITE) or m["site"] or "-",
            ]
        )
    return table(rows)


def machine_page(m: Answer) -> list[str]:
    """Everything `machine NAME` shows: state, room, GPUs with health, ports, labels."""
    seen = when(m["last_seen"])
    reason = m["cordon_reason"]
    lines = [
        f"{m['name']}: {state_text(m)}" + (f" — {reason}" if reason else ""),
        f"  last seen   {seen.isoformat() if seen else 'never'}",
        f"  address     {m['address'] or NO_ADDRESS}",
        f"  cores       {m['cpu_cores_allocated']:g} of {m['cpu_cores']:g} allocated",
        f"  memory      {m['memory_bytes_allocated'] / GIB:.0f} of {m['memory_bytes'] / GIB:.0f}"
        " GiB allocated",
        f"  GPUs        {gpus_text(m)} free ({health_text(m)})",
        f"  fabric      {fabric_text(m)}",
        f"  ethernet    {speed_text(m['ethernet_mbps'])}",
        f"  runs        {', '.join(m['runs']) or '-'}",
    ]
    lines += [f"  label       {key}={value}" for key, value in sorted(m["labels"].items())]
    signals = signals_of(m)
    rows = [
        [f"gpu {g['index']}", g["model"], g["health"], g["task"] or "-", signals.get(g["uuid"], "")]
        for g in m["gpus"]
    ]
    lines += table(rows, indent="  ")
    report = m["report"]
    for port in report["rdma_ports"] if report else []:
        layer = "Omni-Path" if port["omni_path"] else port["link_layer"]
        lines.append(
            f"  port {port['device']}/{port['port']}  {layer}  {port['state']}"
            f"  {port['rate_gbps']:g} Gb/s" + ("  at risk" if port["at_risk"] else "")
        )
    for r in m["reservations"]:
        what = (
            ", ".join(f"{k}={v}" for k, v in r["labels"].items()) or f"workspace {r['workspace']}"
        )
        lines.append(f"  reserved    #{r['id']} for {what}")
    return lines


def signals_of(m: Answer) -> dict[str, str]:
    """Each GPU's health signals in words, by UUID, from the machine's last report."""
    report = m["report"]
    if report is None:
        return {}
    return {
        gpu["uuid"]: "; ".join(signal["message"] for signal in gpu["health"]["signals"])
        for gpu in report["gpus"]
    }
