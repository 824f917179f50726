"""The config file `accelerate launch` reads in a plain worker's HOME: the worker's share of the
run (machine rank, machines, processes) and where it meets, so that `accelerate launch train.py`
with no flags starts as `torchrun train.py` does (docs/cli.md, "Launch a distributed run").

Accelerate reads no environment variable for its shape or port: only its flags and this file.
"""

import json
import os
from collections.abc import Mapping
from pathlib import Path

from ..rendezvous import ACCELERATE_CONFIG, ACCELERATE_VARIABLE, accelerate_config
from .workdir import Worker

FILE_MODE = 0o600
DIR_MODE = 0o700


def write_accelerate_config(where: Worker, env: Mapping[str, str]) -> Path | None:
    """Write the config for the worker whose final environment is `env` into its fresh working
    directory, each folder and the file owned by the worker's user (its hub cache goes beside
    it, in `~/.cache/huggingface/`); the path, or None where `env` names none (a container, or
    values Accelerate's config cannot say)."""
    config = accelerate_config(env)
    if ACCELERATE_VARIABLE not in env or config is None:
        return None
    path = where.workdir / ACCELERATE_CONFIG
    folder = where.workdir
    for part in Path(ACCELERATE_CONFIG).parent.parts:
        folder = folder / part
        folder.mkdir(mode=DIR_MODE, exist_ok=True)
        _own(folder, where)
    # The directory is the task's, fresh and not yet the worker's to change: nothing in it
    # can be a link placed by the worker.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(config, out, indent=2)
        out.write("\n")
    _own(path, where)
    return path


def _own(path: Path, where: Worker) -> None:
    if where.user is not None:
        os.chown(path, where.user.uid, where.user.gid, follow_symlinks=False)
