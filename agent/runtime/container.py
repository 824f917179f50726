"""Runs with an image: the container runtime, if any, and the exact command that starts one.

No string a user wrote is ever read as one of the runtime's flags: the image is checked as an
OCI reference and follows `--`, the command follows the image, the variables go in a file, and
every other argument is the agent's own, in `--flag=value` form.
"""

import logging
import os
import re
import shutil
import socket
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from astraeus.shared import Assignment
from astraeus.shared.clock import SYSTEM_CLOCK, Clock
from astraeus.shared.image import check_image

from ..environment import NVIDIA_CONTROL, WorkerEnvironment
from .state import worker_name
from .users import WorkerUser

log = logging.getLogger(__name__)
RUNTIMES = ("podman", "docker")
"""In order of preference: podman needs no daemon and reads CDI specs natively."""
CONTAINER_CAPABILITY = "container"
_NVIDIA_GPU_NODE = re.compile(r"^/dev/nvidia\d+$")

Which = Callable[[str], str | None]

DOCKER_SOCKET = "/var/run/docker.sock"
"""Where the docker CLI finds its daemon without `DOCKER_HOST` (the default context)."""
PING_SECONDS = 2.0
"""How long the daemon's socket has to answer `GET /_ping`."""
INFO_SECONDS = 10.0
"""How long `<runtime> info` has to succeed (podman reads its storage; a first run is slow)."""
PING_RECHECK_SECONDS = 10.0
INFO_RECHECK_SECONDS = 60.0
"""How often the runtimes are asked again: a socket's ping is cheap, a command is not."""


@dataclass(frozen=True)
class Probe:
    """Whether one runtime answered: `problem` None when it did, else why not; `cheap`: asked
    through the socket (so it may be asked again soon)."""

    problem: str | None
    cheap: bool


def probe_runtime(
    path: str,
    env: Mapping[str, str],
    *,
    run: Callable[..., "subprocess.CompletedProcess[bytes]"] = subprocess.run,
) -> Probe:
    """Does the runtime at `path` work here? docker: its daemon's unix socket answers
    `GET /_ping` (`DOCKER_HOST=unix://…`, else /var/run/docker.sock); docker without that
    socket (another context, `tcp://`) and podman (no daemon): `<runtime> info` succeeds."""
    name = Path(path).name
    if name.startswith("docker"):
        host = env.get("DOCKER_HOST", "")
        socket_path = host.removeprefix("unix://") if host.startswith("unix://") else None
        if not host and os.path.exists(DOCKER_SOCKET):
            socket_path = DOCKER_SOCKET
        if socket_path is not None:
            return Probe(ping_daemon(socket_path), cheap=True)
    return Probe(_info(path, env, run), cheap=False)


def ping_daemon(socket_path: str, timeout: float = PING_SECONDS) -> str | None:
    """None when the daemon at `socket_path` answers `GET /_ping` with 200 OK, else why not."""
    where = f"the daemon at {socket_path}"
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(timeout)
            conn.connect(socket_path)
            conn.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            answer = b""  # the status line is all that is read: a daemon may keep the line open
            while b"\r\n" not in answer and len(answer) < 4096 and (piece := conn.recv(4096)):
                answer += piece
    except TimeoutError:
        return f"{where} did not answer in {timeout:g} s"
    except OSError as error:
        return f"cannot reach {where}: {error.strerror or error}"
    status = answer.split(b"\r\n", 1)[0].decode("latin-1")
    parts = status.split()
    if len(parts) < 2 or parts[1] != "200":
        return f"{where} answered /_ping with {status[:80]!r}"
    return None


def _info(
    path: str, env: Mapping[str, str], run: Callable[..., "subprocess.CompletedProcess[bytes]"]
) -> str | None:
    """None when `<path> info` succeeds in time, else why not (the last line it wrote)."""
    try:
        done = run(
            [path, "info"],
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=INFO_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"`{path} info` did not finish in {INFO_SECONDS:g} s"
    except OSError as error:
        return f"cannot run {path}: {error.strerror or error}"
    if done.returncode != 0:
        lines = (done.stderr or b"").decode(errors="replace").strip().splitlines()
        detail = f": {lines[-1][:200]}" if lines else ""
        return f"`{path} info` failed with exit code {done.returncode}{detail}"
    return None


class ContainerRuntimes:
    """The container runtime runs with an image use: the first of podman and docker that is
    installed *and answers* (a docker CLI without its daemon does not count). Asked again
    every 10 s (a socket's ping) or 60 s (a command), so a daemon that starts later is found
    and one that stops is dropped; each change is logged once."""

    def __init__(
        self,
        *,
        which: Which = shutil.which,
        probe: Callable[[str, Mapping[str, str]], Probe] = probe_runtime,
        env: Mapping[str, str] | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._which, self._probe, self._clock = which, probe, clock
        self._env = dict(os.environ if env is None else env)
        self._chosen: str | None = None
        self._next_check: float | None = None
        self._said: dict[str, str | None] = {}

    def known(self) -> str | None:
        """The runtime found at the last check (no check now: the runner asks at every start)."""
        return self._chosen

    def refresh(self) -> str | None:
        """The runtime to use, asking the runtimes again when the last check is old enough."""
        now = self._clock.now().timestamp()
        if self._next_check is not None and now < self._next_check:
            return self._chosen
        chosen, interval = None, INFO_RECHECK_SECONDS
        for name in RUNTIMES:
            path = self._which(name)
            if not path:
                continue
            probe = self._probe(path, self._env)
            if probe.cheap:
                interval = min(interval, PING_RECHECK_SECONDS)
            self._say(path, probe.problem)
            if probe.problem is None:
                chosen = path
                break
        self._chosen, self._next_check = chosen, now + interval
        return chosen

    def capabilities(self) -> list[str]:
        """What the agent adds to its report: `container` only while a runtime answers."""
        return [CONTAINER_CAPABILITY] if self.refresh() else []

    def _say(self, path: str, problem: str | None) -> None:
        if path in self._said and self._said[path] == problem:
            return
        self._said[path] = problem
        if problem is None:
            log.info("container runtime %s answers: runs with an image can start here", path)
        else:
            log.warning(
                "container runtime %s does not answer (%s): no `container` capability while it"
                " does not",
                path,
                problem,
            )


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
