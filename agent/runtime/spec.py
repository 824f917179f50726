"""What the shim is told to run for one assignment: the command and its whole environment."""

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from astraeus.shared import Assignment

from ..environment import WorkerEnvironment
from .container import container_command
from .sdnotify import SYSTEMD_VARIABLES


class CannotStartError(Exception):
    """The worker cannot be started here; the text says why, for the task's message."""


@dataclass(frozen=True)
class Files:
    """The files of one task in the state directory."""

    spec: Path
    log: Path
    started: Path
    status: Path


def worker_env(
    agent_env: Mapping[str, str], assignment: Assignment, worker: WorkerEnvironment
) -> dict[str, str]:
    """The agent's environment without its own settings, then the user's, then the placement's.

    The placement's variables win (they keep workers on their GPUs), except the NCCL tuning
    knobs a user set on purpose.
    """
    base = {
        key: value
        for key, value in agent_env.items()
        if key not in SYSTEMD_VARIABLES and not key.startswith("ASTRAEUS_")
    }
    placed = {
        key: value
        for key, value in worker.env.items()
        if not (key.startswith("NCCL_") and key in assignment.env)
    }
    return {**base, **assignment.env, **placed}


def shim_spec(
    assignment: Assignment,
    worker: WorkerEnvironment,
    env: dict[str, str],
    files: Files,
    *,
    runtime: str | None,
) -> dict[str, Any]:
    """The JSON the shim reads: command, environment, and where to write what."""
    if assignment.image is None:
        command = list(assignment.command)
    elif runtime is None:
        raise CannotStartError(f"image {assignment.image} needs podman or docker on this machine")
    else:
        command = container_command(runtime, assignment, worker)
    return {
        "command": command,
        "env": env,
        "cwd": str(files.spec.parent),
        "log": str(files.log),
        "started": str(files.started),
        "status": str(files.status),
        "memlock": worker.memlock_unlimited,
    }
