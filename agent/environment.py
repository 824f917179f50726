"""The environment, device nodes and limits a worker gets from its assignment. Pure: no I/O.

The runner calls `worker_environment` once per task, just before it starts the worker; a
`WorkerEnvironmentError` fails the task with its message instead of starting it.
"""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from astraeus.shared import Assignment, GpuInfo, LinkLayer, MachineReport, NetworkKind, RdmaPort
from astraeus.shared.choices import Vendor

from .rendezvous import rendezvous_variables, socket_interface

IMEX_CHANNEL0 = "/dev/nvidia-caps-imex-channels/channel0"
"""Channel 0, the one every worker of an NVLink domain shares (hardware reference §6)."""

RDMA_CM = "/dev/infiniband/rdma_cm"
RDMA_DIR = "/dev/infiniband"
NVIDIA_CONTROL = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
"""Every CUDA process opens these besides its GPUs' own `/dev/nvidia<minor>`; they open no GPU."""
AMD_KFD = "/dev/kfd"
"""ROCm's compute interface; the kernel lets a process use only the GPUs whose render node its
device cgroup allows, so `/dev/kfd` with one render node is that GPU alone."""
NVIDIA_CDI = "nvidia.com/gpu="


@dataclass(frozen=True)
class VendorStack:
    """What a worker needs of one vendor's software stack to use that vendor's GPUs."""

    visible_variable: str
    """The variable the vendor's runtime reads for the GPUs a process may use."""
    by_uuid: bool
    """Whether that variable names GPUs by UUID, else by the report's index."""
    hide_when_none: bool
    """Whether a worker given none of this vendor's GPUs, on a machine that has some, gets the
    variable empty, which hides them all."""
    shared_devices: tuple[str, ...] = ()
    """Nodes the stack opens besides each GPU's own, given once to a worker with such GPUs."""
    cdi_prefix: str | None = None
    """Containers get each GPU as the CDI device `<prefix><uuid>` instead of its nodes."""


STACKS: Final[Mapping[Vendor, VendorStack]] = {
    # CUDA numbers GPUs its own way (NVML's index may differ), so NVIDIA GPUs go by UUID.
    Vendor.NVIDIA: VendorStack(
        "CUDA_VISIBLE_DEVICES",
        by_uuid=True,
        hide_when_none=True,
        shared_devices=NVIDIA_CONTROL,
        cdi_prefix=NVIDIA_CDI,
    ),
    Vendor.AMD: VendorStack(
        "ROCR_VISIBLE_DEVICES", by_uuid=False, hide_when_none=False, shared_devices=(AMD_KFD,)
    ),
    Vendor.INTEL: VendorStack("ZE_AFFINITY_MASK", by_uuid=False, hide_when_none=False),
}
"""Each vendor's stack, in the order its variables and devices are given."""

MIB = 1024**2
DEFAULT_SHM_BYTES = 64 * MIB
"""Docker's and podman's own default, kept for workers without GPUs."""
GPU_SHM_MIN_BYTES = 1024 * MIB
"""The larger /dev/shm of a GPU worker: half its memory, and never less than this."""

RDMA_NETWORKS = (NetworkKind.INFINIBAND, NetworkKind.RDMA)


class WorkerEnvironmentError(ValueError):
    """The assignment cannot be started on this machine as it is now; the text says why."""


@dataclass(frozen=True)
class WorkerEnvironment:
    """What a worker is given besides its command."""

    env: dict[str, str]
    devices: tuple[str, ...]
    """The device nodes the worker may open, and no others where the launcher can enforce it."""
    cdi_devices: tuple[str, ...]
    """The assigned NVIDIA GPUs by CDI name, which containers get instead of their nodes: the
    NVIDIA Container Toolkit's spec for one GPU holds its node, the control nodes and the
    driver's libraries."""
    capabilities: tuple[str, ...]
    memlock_unlimited: bool
    shm_size_bytes: int
    mounts: tuple[tuple[str, str], ...] = ()
    """(path on this machine, path in the container) of each drive, for containers."""


def worker_environment(
    assignment: Assignment,
    report: MachineReport,
    *,
    imex_channel_path: str = IMEX_CHANNEL0,
    uverbs: Mapping[str, str] | None = None,
    own_port: int | None = None,
) -> WorkerEnvironment:
    """Everything the worker of `assignment` needs on the machine described by `report`.

    `uverbs` maps an RDMA device name to its `/dev/infiniband/uverbsN` node where the caller
    knows it; an RDMA run whose devices are not all mapped gets all of `/dev/infiniband`.
    `own_port` is the free port the caller found for a world of one, whose assignment names
    none (`MASTER_PORT` all the same, for frameworks that open a store even alone).
    """
    gpus = assigned_gpus(assignment, report)
    ports = nccl_ports(assignment, report)
    mounts = drive_mounts(assignment, report)
    env = {
        **_task_variables(assignment),
        **_gpu_variables(gpus, report),
        **rendezvous_variables(assignment, len(gpus), meeting_port(assignment, own_port)),
        **_network_variables(assignment, ports),
        **socket_interface(report.advertise_address, report.network_interfaces),
        **_drive_variables(assignment, mounts),
    }
    devices = [*_gpu_devices(gpus), *_rdma_devices(ports, uverbs or {})]
    if assignment.network is NetworkKind.NVLINK:
        devices.append(_imex_channel(report, imex_channel_path))
    rdma = bool(ports)
    return WorkerEnvironment(
        env=env,
        devices=tuple(dict.fromkeys(devices)),
        cdi_devices=_cdi_devices(gpus),
        capabilities=("IPC_LOCK",) if rdma else (),
        memlock_unlimited=bool(gpus) or rdma,
        shm_size_bytes=_shm_size(assignment, gpus),
        mounts=tuple(mounts),
    )


def meeting_port(assignment: Assignment, own_port: int | None) -> int:
    """The assignment's `master_port`; for a world of one, which holds none, `own_port`."""
    port = assignment.rendezvous.master_port
    if port is None:
        port = own_port
    if port is None:
        raise WorkerEnvironmentError(
            "rendezvous.master_port: none given, and no free port of its own was found here"
        )
    return port


def assigned_gpus(assignment: Assignment, report: MachineReport) -> list[GpuInfo]:
    """The report's GPUs named by `assigned_gpu_ids`, in the assignment's order."""
    by_uuid = {gpu.uuid: gpu for gpu in report.gpus}
    missing = [uuid for uuid in assignment.assigned_gpu_ids if uuid not in by_uuid]
    if missing:
        raise WorkerEnvironmentError(
            f"assigned_gpu_ids: {', '.join(missing)} not on machine {report.name}"
        )
    return [by_uuid[uuid] for uuid in assignment.assigned_gpu_ids]


def nccl_ports(assignment: Assignment, report: MachineReport) -> list[RdmaPort]:
    """The ports NCCL may use: up, at least `min_gbps`, one link layer (InfiniBand first)."""
    if assignment.network not in RDMA_NETWORKS:
        return []
    # Omni-Path ports are never NCCL's InfiniBand ports (docs/decisions.md, "Omni-Path").
    fast = [
        p
        for p in report.rdma_ports
        if p.up and not p.omni_path and p.rate_gbps >= (assignment.min_gbps or 0)
    ]
    layers = [LinkLayer.INFINIBAND]
    if assignment.network is NetworkKind.RDMA:
        layers.append(LinkLayer.ETHERNET)
    for layer in layers:
        chosen = [port for port in fast if port.link_layer is layer]
        if chosen:
            return chosen
    speed = f" at {assignment.min_gbps:g} Gb/s or more" if assignment.min_gbps else ""
    kind = "InfiniBand" if assignment.network is NetworkKind.INFINIBAND else "RDMA"
    raise WorkerEnvironmentError(f"no {kind} port is up{speed} on machine {report.name}")


def drive_variable(name: str) -> str:
    """`ASTRAEUS_DRIVE_<NAME>`: the drive's name in capitals, other characters as `_`."""
    return "ASTRAEUS_DRIVE_" + re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def drive_mounts(assignment: Assignment, report: MachineReport) -> list[tuple[str, str]]:
    """(path here, path in the container) of each drive the run mounts: the drive must be one
    this machine's agent is configured with, and reachable at its last scan."""
    by_name = {drive.name: drive for drive in report.drives}
    mounts = []
    for mount in assignment.drives:
        drive = by_name.get(mount.name)
        if drive is None or drive.path is None:
            raise WorkerEnvironmentError(f"drive {mount.name} is not on machine {report.name}")
        if not drive.reachable:
            raise WorkerEnvironmentError(
                f"drive {mount.name} is not reachable on machine {report.name} ({drive.path})"
            )
        for path in (drive.path, mount.mount_path):
            # A comma would let a path add options to the runtime's `--mount` list.
            if "," in path or not path.startswith("/"):
                raise WorkerEnvironmentError(f"drive {mount.name}: {path!r} cannot be mounted")
        mounts.append((drive.path, mount.mount_path))
    return mounts


def _drive_variables(assignment: Assignment, mounts: list[tuple[str, str]]) -> dict[str, str]:
    """Each drive's path as the worker sees it: in its container, or on the machine."""
    return {
        drive_variable(mount.name): inside if assignment.image else here
        for mount, (here, inside) in zip(assignment.drives, mounts, strict=True)
    }


RESTART_VARIABLES = ("ASTRAEUS_RESTART_COUNT", "TORCHELASTIC_RESTART_COUNT")
"""How many times the run was placed again after a fault, for a worker resuming from its
checkpoint; TorchElastic's own name too, which training scripts already read."""


def _task_variables(assignment: Assignment) -> dict[str, str]:
    restarts = str(assignment.restart_count)
    return {
        "ASTRAEUS_TASK": assignment.task,
        "ASTRAEUS_RUN": assignment.run,
        "ASTRAEUS_WORKSPACE": assignment.workspace,
        **dict.fromkeys(RESTART_VARIABLES, restarts),
    }


def _gpu_variables(gpus: Sequence[GpuInfo], report: MachineReport) -> dict[str, str]:
    env = {
        "ASTRAEUS_GPU_COUNT": str(len(gpus)),
        "ASTRAEUS_ASSIGNED_GPU_IDS": ",".join(gpu.uuid for gpu in gpus),
    }
    given = {gpu.vendor for gpu in gpus}
    present = {gpu.vendor for gpu in report.gpus}
    for vendor, stack in STACKS.items():
        if vendor in given or (stack.hide_when_none and vendor in present):
            env[stack.visible_variable] = ",".join(
                gpu.uuid if stack.by_uuid else str(gpu.index)
                for gpu in gpus
                if gpu.vendor is vendor
            )
    return env


def _cdi_devices(gpus: Sequence[GpuInfo]) -> tuple[str, ...]:
    """The CDI names of the GPUs whose vendor's stack has them, in the assignment's order."""
    names = []
    for gpu in gpus:
        prefix = STACKS[gpu.vendor].cdi_prefix
        if prefix is not None:
            names.append(prefix + gpu.uuid)
    return tuple(names)


def _network_variables(assignment: Assignment, ports: Sequence[RdmaPort]) -> dict[str, str]:
    if ports:
        # `=` makes NCCL match names exactly, so mlx5_1 does not also select mlx5_10.
        return {"NCCL_IB_HCA": "=" + ",".join(port.hca_name for port in ports)}
    if assignment.network is NetworkKind.ETHERNET:
        return {"NCCL_IB_DISABLE": "1"}
    return {}


def _gpu_devices(gpus: Sequence[GpuInfo]) -> list[str]:
    """Each GPU's own node, from discovery's facts, then what its vendor's stack opens besides."""
    unknown = [gpu.uuid for gpu in gpus if gpu.device_node is None]
    if unknown:
        raise WorkerEnvironmentError(
            f"assigned_gpu_ids: the device node of {', '.join(unknown)} is not known (no NVML "
            "minor number or DRM render node), so it cannot be given to a worker alone"
        )
    devices = [str(gpu.device_node) for gpu in gpus]
    given = {gpu.vendor for gpu in gpus}
    for vendor, stack in STACKS.items():
        if vendor in given:
            devices.extend(stack.shared_devices)
    return devices


def _rdma_devices(ports: Sequence[RdmaPort], uverbs: Mapping[str, str]) -> list[str]:
    if not ports:
        return []
    names = list(dict.fromkeys(port.device for port in ports))
    if not all(name in uverbs for name in names):
        return [RDMA_DIR]
    return [RDMA_CM, *(uverbs[name] for name in names)]


def _imex_channel(report: MachineReport, path: str) -> str:
    if not report.imex.available:
        detail = f": {report.imex.detail}" if report.imex.detail else ""
        raise WorkerEnvironmentError(f"IMEX channel is not available on this machine{detail}")
    return path


def _shm_size(assignment: Assignment, gpus: Sequence[GpuInfo]) -> int:
    if not gpus:
        return DEFAULT_SHM_BYTES
    return max(GPU_SHM_MIN_BYTES, assignment.memory_bytes // 2)
