"""What the shim is told to run for one assignment: the command, its environment and its user."""

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from astraeus.shared import Assignment
from astraeus.shared.sdnotify import SYSTEMD_VARIABLES

from ..environment import WorkerEnvironment
from ..rendezvous import ACCELERATE_CONFIG, ACCELERATE_VARIABLE, accelerate_config, runs_own
from .container import container_cleanup, container_command
from .workdir import Worker

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CONTAINER_ENV = "container.env"


class CannotStartError(Exception):
    """The worker cannot be started here; the text says why, for the task's message."""


@dataclass(frozen=True)
class Files:
    """The files of one task in the state directory."""

    spec: Path
    log: Path
    started: Path
    status: Path


def agent_base_env(agent_env: Mapping[str, str]) -> dict[str, str]:
    """The agent's environment without its own settings and systemd's variables."""
    return {
        key: value
        for key, value in agent_env.items()
        if key not in SYSTEMD_VARIABLES and not key.startswith("ASTRAEUS_")
    }


def placed_env(assignment: Assignment, worker: WorkerEnvironment) -> dict[str, str]:
    """The user's variables, then the placement's, which win (they keep workers on their
    GPUs), except the NCCL tuning knobs and the rendezvous variables a user set on purpose;
    a user's `MASTER_PORT` or `MASTER_ADDR` is given to its `PET_*` twin too, and the reverse
    (`runs_own`), so torchrun meets where `env://` does."""
    own = runs_own(assignment.env)
    placed = {
        key: value
        for key, value in worker.env.items()
        if key not in own and not (key in assignment.env and key.startswith("NCCL_"))
    }
    return {**assignment.env, **placed, **own}


WORKER_BASE = ("PATH", "LANG")
"""What every plain worker gets of the agent's environment, with `LC_*`: where programs are and
how text reads. Nothing else unless the operator lists it (`worker_env_passthrough`): an agent's
environment may hold secrets (`AWS_*`, `PIP_INDEX_URL` with a password, a proxy's credentials)
that must never reach a tenant's worker."""


def worker_base_env(
    agent_env: Mapping[str, str], passthrough: Iterable[str] = ()
) -> dict[str, str]:
    """What a plain worker starts from: `PATH`, `LANG`, `LC_*` and the variables the operator
    passes through, never the agent's own settings (`ASTRAEUS_*`) or systemd's."""
    kept = {*WORKER_BASE, *passthrough}
    return {
        key: value
        for key, value in agent_base_env(agent_env).items()
        if key in kept or key.startswith("LC_")
    }


def worker_env(
    agent_env: Mapping[str, str],
    assignment: Assignment,
    worker: WorkerEnvironment,
    workdir: Path,
    passthrough: Iterable[str] = (),
) -> dict[str, str]:
    """A plain worker's environment, from a clean start: `worker_base_env`, HOME and TMPDIR in
    its working directory, then the user's variables, then the placement's; and where
    `accelerate_config` can be written, its path (`ASTRAEUS_ACCELERATE_CONFIG`)."""
    base = worker_base_env(agent_env, passthrough)
    places = {"HOME": str(workdir), "TMPDIR": str(workdir / "tmp")}
    env = {**base, **places, **placed_env(assignment, worker)}
    if accelerate_config(env) is not None:
        env[ACCELERATE_VARIABLE] = str(workdir / ACCELERATE_CONFIG)
    return env


def shim_spec(
    assignment: Assignment,
    worker: WorkerEnvironment,
    files: Files,
    where: Worker,
    *,
    agent_env: Mapping[str, str],
    runtime: str | None,
    passthrough: Iterable[str] = (),
) -> dict[str, Any]:
    """The JSON the shim reads: command, environment, user, and where to write what."""
    check_env(assignment.env, container=assignment.image is not None)
    spec: dict[str, Any] = {
        "cwd": str(where.workdir),
        "log": str(files.log),
        "started": str(files.started),
        "status": str(files.status),
        "memlock": worker.memlock_unlimited,
        "env_file": None,
        "cleanup": None,
    }
    if assignment.image is None:
        env = worker_env(agent_env, assignment, worker, where.workdir, passthrough)
        user = where.user.as_spec() if where.user else None
        return {**spec, "command": list(assignment.command), "env": env, "user": user}
    if runtime is None:
        raise CannotStartError(f"image {assignment.image} needs podman or docker on this machine")
    env_file = str(files.spec.with_name(CONTAINER_ENV))
    try:
        command = container_command(runtime, assignment, worker, env_file=env_file, user=where.user)
    except ValueError as error:
        raise CannotStartError(f"image: {error}") from None
    # The runtime itself (root's podman or docker CLI) runs with the agent's environment only:
    # a user's LD_PRELOAD or PATH must not reach it. The user's variables go to the container.
    return {
        **spec,
        "command": command,
        "env": agent_base_env(agent_env),
        "user": None,
        "env_file": {"path": env_file, "values": placed_env(assignment, worker)},
        "cleanup": container_cleanup(runtime, assignment),
    }


def check_env(env: Mapping[str, str], *, container: bool) -> None:
    """Names a process environment can hold and values without NUL; for a container, values
    without line breaks too (its variables file holds one per line). The coordinator refuses
    bad names already; the agent does not rely on it."""
    for name, value in env.items():
        if not ENV_NAME.match(name):
            raise CannotStartError(f"env: {name[:100]!r} is not a variable name")
        if "\0" in value:
            raise CannotStartError(f"env.{name}: a value may not hold a NUL byte")
        if container and ("\n" in value or "\r" in value):
            raise CannotStartError(
                f"env.{name}: a container's variable may not hold a line break "
                "(podman and docker read them one per line)"
            )
