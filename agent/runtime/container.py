"""Runs with an image: the container runtime, if any, and the exact command that starts one."""

import shutil
from collections.abc import Callable

from astraeus.shared import Assignment

from ..environment import WorkerEnvironment
from .state import worker_name

RUNTIMES = ("podman", "docker")
"""In order of preference: podman needs no daemon and reads CDI specs natively."""
CONTAINER_CAPABILITY = "container"
NVIDIA_CDI = "nvidia.com/gpu="

Which = Callable[[str], str | None]


def container_runtime(which: Which = shutil.which) -> str | None:
    """The path of the first container runtime found on PATH, or None."""
    for name in RUNTIMES:
        path = which(name)
        if path:
            return path
    return None


def runtime_capabilities(which: Which = shutil.which) -> list[str]:
    """Capabilities the agent adds to its report: `container` only where a runtime is present."""
    return [CONTAINER_CAPABILITY] if container_runtime(which) else []


def container_command(runtime: str, assignment: Assignment, worker: WorkerEnvironment) -> list[str]:
    """`<runtime> run …` for the assignment's image and command.

    Variables are passed by name only (`--env NAME`): the runtime reads their values from its own
    environment, which the shim sets, so no value shows on a command line.
    """
    if assignment.image is None:
        raise ValueError("container_command needs an assignment with an image")
    docker = runtime.rsplit("/", 1)[-1] == "docker"
    args = [runtime, "run", "--rm", "--name", worker_name(assignment), "--network=host"]
    args += [f"--shm-size={worker.shm_size_bytes}"]
    if worker.memlock_unlimited:
        args += ["--ulimit", "memlock=-1:-1"]
    args += [f"--cap-add={cap}" for cap in worker.capabilities]
    args += _device_args(worker.devices, docker=docker)
    if assignment.cpu_cores:
        args += [f"--cpus={assignment.cpu_cores:g}"]
    if assignment.memory_bytes:
        args += [f"--memory={assignment.memory_bytes}"]
    # Drives as bind mounts at the run's `mount_path` (paths checked to hold no comma).
    args += [f"--mount=type=bind,source={here},target={inside}" for here, inside in worker.mounts]
    for name in sorted({*assignment.env, *worker.env}):
        args += ["--env", name]
    return [*args, assignment.image, *assignment.command]


def _device_args(devices: tuple[str, ...], *, docker: bool) -> list[str]:
    gpus = [d.removeprefix(NVIDIA_CDI) for d in devices if d.startswith(NVIDIA_CDI)]
    args = []
    if docker and gpus:
        # Docker takes NVIDIA GPUs through the NVIDIA Container Toolkit; the inner quotes keep
        # the comma list in one CSV field of the --gpus value.
        args.append(f'--gpus="device={",".join(gpus)}"')
    for device in devices:
        if not (docker and device.startswith(NVIDIA_CDI)):
            args.append(f"--device={device}")
    return args
