"""worker_environment: exact variables, devices and limits for each kind of machine and run."""

from typing import Any

import pytest
from runtime_rig import uuid

from astraeus.agent.environment import (
    DEFAULT_SHM_BYTES,
    GPU_SHM_MIN_BYTES,
    IMEX_CHANNEL0,
    NVIDIA_CONTROL,
    STACKS,
    WorkerEnvironmentError,
    worker_environment,
)
from astraeus.agent.runtime.spec import placed_env
from astraeus.shared import SCHEMA_VERSION, Assignment, MachineReport, Vendor

GIB = 1024**3


def _gpu(i: int, vendor: str = "nvidia", node: str | None = None) -> dict[str, Any]:
    node = node or (f"/dev/nvidia{i}" if vendor == "nvidia" else f"/dev/dri/renderD{128 + i}")
    return {
        "index": i, "uuid": uuid(i), "vendor": vendor, "model": "m", "memory_bytes": 80 * GIB,
        "device_node": node,
    }  # fmt: skip


def _port(device: str, rate: float, *, state: str = "ACTIVE", layer: str = "InfiniBand") -> dict:
    return {"device": device, "port": 1, "state": state, "link_layer": layer, "rate_gbps": rate}


def _machine(count: int = 8, vendor: str = "nvidia", **extra: Any) -> MachineReport:
    return MachineReport.model_validate(
        {
            "schema_version": SCHEMA_VERSION,
            "name": "gpu-01",
            "cpu_cores": 96,
            "memory_bytes": 1024 * GIB,
            "gpus": [_gpu(i, vendor) for i in range(count)],
            **extra,
        }
    )


def _with_gpus(*gpus: dict[str, Any]) -> MachineReport:
    return _machine(0, gpus=list(gpus))


def _assignment(**extra: Any) -> Assignment:
    return Assignment.model_validate(
        {
            "task_uid": "0b5c8f1e-7d2a-4c3b-9e6f-1a2b3c4d5e6f",
            "task": "train-1",
            "run": "train",
            "workspace": "vision",
            "index": 1,
            "command": ["python", "train.py"],
            "rendezvous": {
                "master_addr": "10.0.0.1",
                "master_port": 29500,
                "world_size": 2,
                "rank": 1,
                "node_rank": 1,
                "local_world_size": 1,
            },
            **extra,
        }
    )


IB_PORTS = [
    _port("mlx5_0", 400),
    _port("mlx5_1", 400, state="DOWN"),
    _port("mlx5_10", 200),
    _port("ibp12s0", 400),
    _port("mlx5_4", 400, layer="Ethernet"),
]

BASE = {
    "ASTRAEUS_TASK": "train-1",
    "ASTRAEUS_RUN": "train",
    "ASTRAEUS_WORKSPACE": "vision",
    "ASTRAEUS_RESTART_COUNT": "0",
    "TORCHELASTIC_RESTART_COUNT": "0",
    "MASTER_ADDR": "10.0.0.1",
    "MASTER_PORT": "29500",
    "WORLD_SIZE": "2",
    "RANK": "1",
    "NODE_RANK": "1",
    "LOCAL_RANK": "0",
    "LOCAL_WORLD_SIZE": "1",
    "PET_NNODES": "2",
    "PET_NODE_RANK": "1",
    "PET_MASTER_ADDR": "10.0.0.1",
    "PET_MASTER_PORT": "29500",
}

CASES = [
    pytest.param(
        _machine(),
        _assignment(assigned_gpu_ids=[uuid(3), uuid(1)], network="local"),
        {
            "ASTRAEUS_GPU_COUNT": "2",
            "ASTRAEUS_ASSIGNED_GPU_IDS": f"{uuid(3)},{uuid(1)}",
            "CUDA_VISIBLE_DEVICES": f"{uuid(3)},{uuid(1)}",
        },
        id="nvidia-local-by-uuid-in-assigned-order",
    ),
    pytest.param(
        _machine(),
        _assignment(network="local"),
        {"ASTRAEUS_GPU_COUNT": "0", "ASTRAEUS_ASSIGNED_GPU_IDS": "", "CUDA_VISIBLE_DEVICES": ""},
        id="cpu-worker-on-nvidia-machine-sees-no-gpu",
    ),
    pytest.param(
        _machine(0),
        _assignment(network="local"),
        {"ASTRAEUS_GPU_COUNT": "0", "ASTRAEUS_ASSIGNED_GPU_IDS": ""},
        id="cpu-machine",
    ),
    pytest.param(
        _machine(8, "amd"),
        _assignment(assigned_gpu_ids=[uuid(4), uuid(5)]),
        {
            "ASTRAEUS_GPU_COUNT": "2",
            "ASTRAEUS_ASSIGNED_GPU_IDS": f"{uuid(4)},{uuid(5)}",
            "ROCR_VISIBLE_DEVICES": "4,5",
        },
        id="amd-by-index",
    ),
    pytest.param(
        _machine(4, "intel"),
        _assignment(assigned_gpu_ids=[uuid(2)]),
        {
            "ASTRAEUS_GPU_COUNT": "1",
            "ASTRAEUS_ASSIGNED_GPU_IDS": uuid(2),
            "ZE_AFFINITY_MASK": "2",
        },
        id="intel-by-index",
    ),
    pytest.param(
        _machine(rdma_ports=IB_PORTS),
        _assignment(assigned_gpu_ids=[uuid(0)], network="infiniband", min_gbps=400),
        {
            "ASTRAEUS_GPU_COUNT": "1",
            "ASTRAEUS_ASSIGNED_GPU_IDS": uuid(0),
            "CUDA_VISIBLE_DEVICES": uuid(0),
            "NCCL_IB_HCA": "=mlx5_0:1,ibp12s0:1",
        },
        id="infiniband-up-ports-at-min-gbps-exact-match",
    ),
    pytest.param(
        _machine(rdma_ports=IB_PORTS),
        _assignment(assigned_gpu_ids=[uuid(0)], network="infiniband"),
        {
            "ASTRAEUS_GPU_COUNT": "1",
            "ASTRAEUS_ASSIGNED_GPU_IDS": uuid(0),
            "CUDA_VISIBLE_DEVICES": uuid(0),
            "NCCL_IB_HCA": "=mlx5_0:1,mlx5_10:1,ibp12s0:1",
        },
        id="infiniband-without-min-gbps-takes-every-up-port",
    ),
    pytest.param(
        _machine(rdma_ports=[_port("rocep1s0", 200, layer="Ethernet"), _port("rocep2s0", 100)]),
        _assignment(assigned_gpu_ids=[uuid(0)], network="rdma", min_gbps=200),
        {
            "ASTRAEUS_GPU_COUNT": "1",
            "ASTRAEUS_ASSIGNED_GPU_IDS": uuid(0),
            "CUDA_VISIBLE_DEVICES": uuid(0),
            "NCCL_IB_HCA": "=rocep1s0:1",
        },
        id="roce-when-no-infiniband-port-is-fast-enough",
    ),
    pytest.param(
        _machine(rdma_ports=IB_PORTS),
        _assignment(assigned_gpu_ids=[uuid(0)], network="ethernet"),
        {
            "ASTRAEUS_GPU_COUNT": "1",
            "ASTRAEUS_ASSIGNED_GPU_IDS": uuid(0),
            "CUDA_VISIBLE_DEVICES": uuid(0),
            "NCCL_IB_DISABLE": "1",
        },
        id="multi-machine-over-ethernet-disables-ib",
    ),
]


@pytest.mark.parametrize(("report", "assignment", "expected"), CASES)
def test_variables(report: MachineReport, assignment: Assignment, expected: dict) -> None:
    """Each kind of machine and network gives exactly these variables, plus the rendezvous ones
    (torchrun's `PET_NPROC_PER_NODE` is the worker's GPUs, 1 without)."""
    nproc = str(max(1, int(expected["ASTRAEUS_GPU_COUNT"])))
    assert worker_environment(assignment, report).env == {
        **BASE, "PET_NPROC_PER_NODE": nproc, **expected
    }  # fmt: skip


def test_infiniband_run_gets_rdma_devices_ipc_lock_and_memlock() -> None:
    """An RDMA worker gets rdma_cm and the uverbs of its devices, IPC_LOCK and unlimited memlock."""
    report = _machine(rdma_ports=IB_PORTS)
    assignment = _assignment(assigned_gpu_ids=[uuid(0)], network="infiniband", min_gbps=400)
    uverbs = {"mlx5_0": "/dev/infiniband/uverbs0", "ibp12s0": "/dev/infiniband/uverbs3"}
    got = worker_environment(assignment, report, uverbs=uverbs)
    assert got.devices == (
        "/dev/nvidia0",
        *NVIDIA_CONTROL,
        "/dev/infiniband/rdma_cm",
        "/dev/infiniband/uverbs0",
        "/dev/infiniband/uverbs3",
    )
    assert got.cdi_devices == (f"nvidia.com/gpu={uuid(0)}",)
    assert got.capabilities == ("IPC_LOCK",)
    assert got.memlock_unlimited


def test_unmapped_rdma_device_exposes_the_whole_directory() -> None:
    """Without a uverbs node for every chosen device, the worker gets all of /dev/infiniband."""
    report = _machine(0, rdma_ports=IB_PORTS)
    got = worker_environment(_assignment(network="infiniband", min_gbps=400), report)
    assert got.devices == ("/dev/infiniband",)
    assert got.memlock_unlimited


def test_nvlink_domain_gets_imex_channel_zero() -> None:
    """A multi-machine NVLink run gets IMEX channel 0 as a device."""
    report = _machine(4, imex={"available": True})
    assignment = _assignment(assigned_gpu_ids=[uuid(0)], network="nvlink", nvlink_domain="c1/0")
    got = worker_environment(assignment, report)
    assert got.devices == ("/dev/nvidia0", *NVIDIA_CONTROL, IMEX_CHANNEL0)
    assert got.capabilities == ()


def test_amd_workers_get_their_render_nodes_and_kfd_once() -> None:
    """AMD workers get the render node of each of their GPUs, and /dev/kfd once."""
    got = worker_environment(_assignment(assigned_gpu_ids=[uuid(1), uuid(0)]), _machine(2, "amd"))
    assert got.devices == ("/dev/dri/renderD129", "/dev/dri/renderD128", "/dev/kfd")
    assert got.cdi_devices == ()


def test_every_vendor_has_its_stack() -> None:
    """A vendor added to `Vendor` without its stack (variable, devices) fails here, not on a
    machine with its GPUs."""
    assert list(STACKS) == list(Vendor)


def _mixed() -> MachineReport:
    """Two NVIDIA GPUs (0, 1) and two AMD GPUs (2, 3) in one machine."""
    return _with_gpus(_gpu(0), _gpu(1), _gpu(2, "amd"), _gpu(3, "amd"))


def test_an_amd_worker_on_a_mixed_machine_is_hidden_from_the_nvidia_gpus() -> None:
    """Given AMD GPUs only, a worker gets them by index, an empty CUDA_VISIBLE_DEVICES, the AMD
    stack's /dev/kfd and none of NVIDIA's nodes or CDI names."""
    got = worker_environment(_assignment(assigned_gpu_ids=[uuid(3)], network="local"), _mixed())
    assert (got.env["CUDA_VISIBLE_DEVICES"], got.env["ROCR_VISIBLE_DEVICES"]) == ("", "3")
    assert got.devices == ("/dev/dri/renderD131", "/dev/kfd")
    assert got.cdi_devices == ()


def test_a_worker_given_both_vendors_gets_both_stacks_in_order() -> None:
    """NVIDIA's variable, nodes and CDI names, then AMD's, each for its own GPUs."""
    assignment = _assignment(assigned_gpu_ids=[uuid(2), uuid(1)], network="local")
    got = worker_environment(assignment, _mixed())
    variables = [k for k in got.env if k.endswith("_VISIBLE_DEVICES")]
    assert variables == ["CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"]
    assert (got.env["CUDA_VISIBLE_DEVICES"], got.env["ROCR_VISIBLE_DEVICES"]) == (uuid(1), "2")
    assert got.devices == ("/dev/dri/renderD130", "/dev/nvidia1", *NVIDIA_CONTROL, "/dev/kfd")
    assert got.cdi_devices == (f"nvidia.com/gpu={uuid(1)}",)


def test_gpu_nodes_come_from_the_reported_minor_numbers_not_the_index() -> None:
    """A GPU's node is the one discovery reported: NVML's index 2 may be /dev/nvidia3."""
    report = _with_gpus(_gpu(2, node="/dev/nvidia3"))
    got = worker_environment(_assignment(assigned_gpu_ids=[uuid(2)]), report)
    assert got.devices == ("/dev/nvidia3", *NVIDIA_CONTROL)


def test_cpu_worker_gets_no_device() -> None:
    """A worker without GPUs or RDMA gets no device node at all, not even the control nodes."""
    got = worker_environment(_assignment(), _machine())
    assert (got.devices, got.cdi_devices) == ((), ())


@pytest.mark.parametrize(
    ("memory_bytes", "gpus", "shm", "memlock"),
    [
        pytest.param(0, 0, DEFAULT_SHM_BYTES, False, id="cpu-only-default"),
        pytest.param(0, 1, GPU_SHM_MIN_BYTES, True, id="gpu-at-least-1-gib"),
        pytest.param(64 * GIB, 1, 32 * GIB, True, id="gpu-half-its-memory"),
    ],
)
def test_shm_and_memlock(memory_bytes: int, gpus: int, shm: int, memlock: bool) -> None:
    """GPU workers get a larger /dev/shm and unlimited locked memory; CPU workers the defaults."""
    ids = [uuid(i) for i in range(gpus)]
    got = worker_environment(
        _assignment(assigned_gpu_ids=ids, memory_bytes=memory_bytes), _machine()
    )
    assert (got.shm_size_bytes, got.memlock_unlimited) == (shm, memlock)


@pytest.mark.parametrize(
    ("report", "assignment", "message"),
    [
        pytest.param(
            _machine(2),
            _assignment(assigned_gpu_ids=[uuid(7)]),
            f"assigned_gpu_ids: {uuid(7)} not on machine gpu-01",
            id="unknown-gpu",
        ),
        pytest.param(
            _with_gpus({**_gpu(0), "device_node": None}),
            _assignment(assigned_gpu_ids=[uuid(0)]),
            f"assigned_gpu_ids: the device node of {uuid(0)} is not known (no NVML minor "
            "number or DRM render node), so it cannot be given to a worker alone",
            id="no-device-node",
        ),
        pytest.param(
            _machine(rdma_ports=IB_PORTS),
            _assignment(network="infiniband", min_gbps=800),
            "no InfiniBand port is up at 800 Gb/s or more on machine gpu-01",
            id="no-fast-port",
        ),
        pytest.param(
            _machine(rdma_ports=[_port("mlx5_0", 400, state="DOWN")]),
            _assignment(network="rdma"),
            "no RDMA port is up on machine gpu-01",
            id="all-ports-down",
        ),
        pytest.param(
            _machine(rdma_ports=[{**_port("hfi1_0", 100), "omni_path": True}]),
            _assignment(network="infiniband"),
            "no InfiniBand port is up on machine gpu-01",
            id="omni-path-only",
        ),
        pytest.param(
            _machine(imex={"available": False, "detail": "no nvidia-caps-imex-channels major"}),
            _assignment(network="nvlink"),
            "IMEX channel is not available on this machine: no nvidia-caps-imex-channels major",
            id="no-imex",
        ),
    ],
)
def test_refusals(report: MachineReport, assignment: Assignment, message: str) -> None:
    """An assignment the machine cannot honour now is refused with a text naming the problem."""
    with pytest.raises(WorkerEnvironmentError) as caught:
        worker_environment(assignment, report)
    assert str(caught.value) == message


def test_a_worker_sharing_its_machine_gets_its_local_rank() -> None:
    """A second worker of a run on one machine gets LOCAL_RANK 1 of LOCAL_WORLD_SIZE 2."""
    shared = _assignment()
    rendezvous = shared.rendezvous.model_copy(update={"local_rank": 1, "local_world_size": 2})
    env = worker_environment(shared.model_copy(update={"rendezvous": rendezvous}), _machine()).env
    assert (env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]) == ("1", "2")


def test_each_worker_is_one_torchrun_node() -> None:
    """Worker 3 of 4 with 4 GPUs, stacked second on its machine, is torchrun's node 3 of 4 with
    4 processes, meeting at worker 0's address and port: `torchrun train.py` needs no flag."""
    rendezvous = {
        "master_addr": "10.0.0.7", "master_port": 29517, "world_size": 4, "rank": 3,
        "node_rank": 2, "local_world_size": 2, "local_rank": 1,
    }  # fmt: skip
    ids = [uuid(i) for i in range(4, 8)]
    env = worker_environment(
        _assignment(rendezvous=rendezvous, assigned_gpu_ids=ids), _machine()
    ).env
    named = ("PET_", "MASTER_", "LOCAL_", "RANK", "WORLD_SIZE", "NODE_RANK")
    assert {k: v for k, v in env.items() if k.startswith(named)} == {
        "MASTER_ADDR": "10.0.0.7", "MASTER_PORT": "29517", "RANK": "3", "WORLD_SIZE": "4",
        "NODE_RANK": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
        "PET_NNODES": "4", "PET_NODE_RANK": "3", "PET_NPROC_PER_NODE": "4",
        "PET_MASTER_ADDR": "10.0.0.7", "PET_MASTER_PORT": "29517",
    }  # fmt: skip


DRIVES = [
    {"name": "datasets", "path": "/mnt/datasets", "capacity_bytes": 1, "free_bytes": 1},
    {"name": "ckpt-2", "path": "/mnt/nfs/ckpt", "local": False},
    {"name": "lost", "path": "/mnt/lost", "reachable": False},
]


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        pytest.param(
            None,
            {"ASTRAEUS_DRIVE_DATASETS": "/mnt/datasets", "ASTRAEUS_DRIVE_CKPT_2": "/mnt/nfs/ckpt"},
            id="plain-process-gets-the-path-here",
        ),
        pytest.param(
            "pytorch:24.08",
            {"ASTRAEUS_DRIVE_DATASETS": "/data", "ASTRAEUS_DRIVE_CKPT_2": "/ckpt"},
            id="container-gets-the-mount-path",
        ),
    ],
)
def test_drives_become_variables_and_mounts(image: str | None, expected: dict[str, str]) -> None:
    """Each drive the run mounts is ASTRAEUS_DRIVE_<NAME> (the path on the machine for a plain
    process, its mount_path in a container) and a bind mount for the container."""
    mounts = [
        {"name": "datasets", "mount_path": "/data"},
        {"name": "ckpt-2", "mount_path": "/ckpt"},
    ]
    worker = worker_environment(_assignment(image=image, drives=mounts), _machine(drives=DRIVES))
    assert {k: v for k, v in worker.env.items() if k.startswith("ASTRAEUS_DRIVE_")} == expected
    assert worker.mounts == (("/mnt/datasets", "/data"), ("/mnt/nfs/ckpt", "/ckpt"))


@pytest.mark.parametrize(
    ("mount", "message"),
    [
        pytest.param(
            {"name": "other", "mount_path": "/o"}, "drive other is not on machine gpu-01", id="none"
        ),
        pytest.param(
            {"name": "lost", "mount_path": "/l"},
            "drive lost is not reachable on machine gpu-01 (/mnt/lost)",
            id="unreachable",
        ),
        pytest.param(
            {"name": "datasets", "mount_path": "/d,source=/etc"},
            "drive datasets: '/d,source=/etc' cannot be mounted",
            id="comma-from-the-wire",
        ),
    ],
)
def test_a_drive_the_machine_cannot_give_fails_the_task(
    mount: dict[str, str], message: str
) -> None:
    """A drive the machine lacks, cannot reach, or a path that would add runtime options, fails
    the task with a sentence instead of starting it."""
    with pytest.raises(WorkerEnvironmentError) as raised:
        worker_environment(_assignment(drives=[mount]), _machine(drives=DRIVES))
    assert str(raised.value) == message


def test_omni_path_ports_never_join_nccl_ib_hca() -> None:
    """An up Omni-Path port beside InfiniBand ones is left out of NCCL_IB_HCA."""
    ports = [{**_port("hfi1_0", 100), "omni_path": True}, _port("mlx5_0", 400)]
    env = worker_environment(_assignment(network="rdma"), _machine(rdma_ports=ports)).env
    assert env["NCCL_IB_HCA"] == "=mlx5_0:1"


def test_a_requeued_runs_workers_get_its_restart_count_and_cannot_forge_it() -> None:
    """A run placed again after a fault (`restart_count` 1) gives its workers
    `ASTRAEUS_RESTART_COUNT=1` and TorchElastic's `TORCHELASTIC_RESTART_COUNT=1`; the run's own
    `env` setting either does not change what the worker sees."""
    forged = {"ASTRAEUS_RESTART_COUNT": "7", "TORCHELASTIC_RESTART_COUNT": "7"}
    assignment = _assignment(restart_count=1, env=forged)
    worker = worker_environment(assignment, _machine())
    env = placed_env(assignment, worker)
    assert (env["ASTRAEUS_RESTART_COUNT"], env["TORCHELASTIC_RESTART_COUNT"]) == ("1", "1")
