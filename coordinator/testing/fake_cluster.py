"""Whole fake machines and runs in a line each, for tests and benchmarks (never the demo, whose
agents scan fake hardware from `agent/fake/`).

GPU UUIDs derive from the machine and the index (`shared/fake_gpu.py`), so runs are reproducible.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from astraeus.coordinator.placement import (
    ClusterSnapshot,
    MachineSnapshot,
    Reservation,
    RunRequest,
)
from astraeus.shared import (
    DriveInfo,
    GpuHealth,
    GpuHealthState,
    GpuInfo,
    ImexStatus,
    LinkLayer,
    MachineReport,
    MachineState,
    PressureCondition,
    RdmaPort,
    RequestedResources,
    Vendor,
    labels,
)
from astraeus.shared.fake_gpu import gpu_uuid

GIB = 1024**3
H100 = "NVIDIA H100 80GB HBM3"
H100_GIB = 79.6


def gpus(
    machine: str,
    count: int,
    *,
    model: str = H100,
    memory_gib: float = H100_GIB,
    vendor: Vendor = Vendor.NVIDIA,
    at_risk: Iterable[int] = (),
    faulted: Iterable[int] = (),
    nvlink_domain: str | None = None,
) -> list[GpuInfo]:
    """`count` GPUs of one model; the listed indices at risk or faulted."""
    risky, broken = set(at_risk), set(faulted)
    return [
        GpuInfo(
            index=index,
            uuid=gpu_uuid(machine, index),
            vendor=vendor,
            model=model,
            memory_bytes=int(memory_gib * GIB),
            health=GpuHealth(state=_health(index, risky, broken)),
            nvlink_domain=nvlink_domain,
        )
        for index in range(count)
    ]


def _health(index: int, at_risk: set[int], faulted: set[int]) -> GpuHealthState:
    if index in faulted:
        return GpuHealthState.FAULTED
    return GpuHealthState.AT_RISK if index in at_risk else GpuHealthState.HEALTHY


def rdma_port(
    *,
    device: str = "mlx5_0",
    gbps: float = 400,
    roce: bool = False,
    subnet: str | None = None,
    up: bool = True,
    at_risk: bool = False,
) -> RdmaPort:
    return RdmaPort(
        device=device,
        port=1,
        state="ACTIVE" if up else "DOWN",
        link_layer=LinkLayer.ETHERNET if roce else LinkLayer.INFINIBAND,
        rate_gbps=gbps,
        subnet_prefix=subnet,
        at_risk=at_risk,
    )


def machine(
    name: str,
    *,
    gpu_list: list[GpuInfo] | None = None,
    gpu_count: int = 8,
    model: str = H100,
    cpu_cores: float = 96,
    memory_gib: int = 1024,
    labels_: Mapping[str, str] | None = None,
    rack: str | None = None,
    fabric: str | None = None,
    site: str | None = None,
    ports: Iterable[RdmaPort] = (),
    used_gpus: Iterable[int] = (),
    used_cores: float = 0,
    used_memory_gib: float = 0,
    state: MachineState = MachineState.UP,
    reported: bool = True,
    cordon: str | None = None,
    reservations: Iterable[Reservation] = (),
    conditions: Iterable[PressureCondition] = (),
    cpu_pressure: bool = False,
    capabilities: Iterable[str] = ("container",),
    drives: Iterable[DriveInfo] = (),
    data_free_gib: float | None = None,
    workers: Iterable[tuple[str, str]] = (),
    imex: bool | None = None,
) -> MachineSnapshot:
    """A machine as the scheduler sees it: its report and what live tasks hold. Its IMEX
    channel is available (`imex`) by default when its GPUs report an NVLink domain, as on a
    GB200 NVL72 tray set up for multi-node work."""
    found = gpu_list if gpu_list is not None else gpus(name, gpu_count, model=model)
    if imex is None:
        imex = any(gpu.nvlink_domain for gpu in found)
    tags = dict(labels_ or {})
    for key, value in ((labels.RACK, rack), (labels.FABRIC, fabric)):
        if value is not None:
            tags[key] = value
    report = MachineReport(
        schema_version="1.0",
        name=name,
        labels=tags,
        cpu_cores=cpu_cores,
        memory_bytes=memory_gib * GIB,
        conditions=list(conditions),
        cpu_pressure=cpu_pressure,
        capabilities=list(capabilities),
        drives=list(drives),
        data_free_bytes=None if data_free_gib is None else int(data_free_gib * GIB),
        gpus=found,
        rdma_ports=list(ports),
        imex=ImexStatus(available=imex),
    )
    return MachineSnapshot(
        name=name,
        state=state,
        report=report if reported else None,
        site=site,
        cordon_reason=cordon,
        used_gpu_ids=frozenset(found[index].uuid for index in used_gpus),
        used_cpu_cores=used_cores,
        used_memory_bytes=int(used_memory_gib * GIB),
        reservations=tuple(reservations),
        workers=tuple(workers),
    )


def snapshot(*machines: MachineSnapshot) -> ClusterSnapshot:
    return ClusterSnapshot(machines=tuple(sorted(machines, key=lambda one: one.name)))


def run(name: str = "run", *, workspace: str = "vision", **fields: Any) -> RunRequest:
    """A run whose `requested_resources` is `ask` (a dict, as the guide writes it)."""
    ask = RequestedResources.model_validate(fields.pop("ask", {}))
    return RunRequest(name=name, workspace=workspace, ask=ask, **fields)
