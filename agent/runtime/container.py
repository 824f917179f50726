"""Runs with an image: the container runtime, if any, and the exact command that starts one.

No string a user wrote is ever read as one of the runtime's flags: the image is checked as an
OCI reference and follows `--`, the command follows the image, the variables go in a file, and
every other argument is the agent's own, in `--flag=value` form.
"""

import re
import shutil
from collections.abc import Callable

from astraeus.shared import Assignment
from astraeus.shared.image import check_image

from ..environment import NVIDIA_CONTROL, WorkerEnvironment
from .state import worker_name
from .users import WorkerUser

RUNTIMES = ("podman", "docker")
"""In order of preference: podman needs no daemon and reads CDI specs natively."""
CONTAINER_CAPABILITY = "container"
_NVIDIA_GPU_NODE = re.compile(r"^/dev/nvidia\d+$")

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


def container_command(
    runtime: str,
    assignment: Assignment,
    worker: WorkerEnvironment,
    *,
    env_file: str,
    user: WorkerUser | None = None,
) -> list[str]:
    """`<runtime> run … -- <image> <command…>` for the assignment; a ValueError names a bad image.

    The variables are in `env_file` (`NAME=VALUE` lines the runtime reads), so no value shows on
    a command line and none reaches the runtime's own environment. `user` (None: the image's
    own) runs the container's processes as the task's uid, with the groups of its devices.
    """
    if assignment.image is None:
        raise ValueError("container_command needs an assignment with an image")
    image = check_image(assignment.image)
    args = [runtime, "run", "--rm", f"--name={worker_name(assignment)}", "--network=host"]
    args += [f"--shm-size={worker.shm_size_bytes}", "--security-opt=no-new-privileges"]
    if worker.memlock_unlimited:
        args.append("--ulimit=memlock=-1:-1")
    args += [f"--cap-add={cap}" for cap in worker.capabilities]
    if user is not None:
        args.append(f"--user={user.uid}:{user.gid}")
        args += [f"--group-add={gid}" for gid in user.groups]
    args += [f"--device={device}" for device in container_devices(worker)]
    if assignment.cpu_cores:
        args.append(f"--cpus={assignment.cpu_cores:g}")
    if assignment.memory_bytes:
        args.append(f"--memory={assignment.memory_bytes}")
    # Drives as bind mounts at the run's `mount_path` (paths checked to hold no comma).
    args += [f"--mount=type=bind,source={here},target={inside}" for here, inside in worker.mounts]
    args.append(f"--env-file={env_file}")
    return [*args, "--", image, *assignment.command]


def container_devices(worker: WorkerEnvironment) -> list[str]:
    """What `--device` gets: the NVIDIA GPUs by CDI name (their spec brings their node, the
    control nodes and the driver's libraries), every other node of the worker's set by path."""
    by_cdi = bool(worker.cdi_devices)
    nodes = [
        device
        for device in worker.devices
        if not (by_cdi and (device in NVIDIA_CONTROL or _NVIDIA_GPU_NODE.match(device)))
    ]
    return [*worker.cdi_devices, *nodes]


def container_cleanup(runtime: str, assignment: Assignment) -> list[str]:
    """`<runtime> rm --force -- NAME`: run once the worker is gone, because a container lives
    under the engine (docker's daemon, podman's conmon), not only below the shim."""
    return [runtime, "rm", "--force", "--", worker_name(assignment)]
