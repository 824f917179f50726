"""The demo's worker: a real process that says what it was given, works a while, and exits.

`python -m astraeus.coordinator.demo.worker SECONDS`
"""

from __future__ import annotations

import os
import sys
import time

SHOWN = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "NCCL_IB_HCA",
    "NCCL_IB_DISABLE",
)
DRIVE_PREFIX = "ASTRAEUS_DRIVE_"


def shown(key: str, value: str) -> str:
    """`KEY=value`; `NCCL_IB_HCA==mlx5_0:1` with a word on its second `=`, which reads as a typo
    but is NCCL's own prefix: match these device names exactly (`mlx5_0`, not `mlx5_01`)."""
    text = f"{key}={value}"
    if key == "NCCL_IB_HCA" and value.removeprefix("^").startswith("="):
        text += " (the '=' before the devices is NCCL's: exactly these names, not all they begin)"
    return text


def main(argv: list[str]) -> int:
    seconds = float(argv[0]) if argv else 5.0
    drives = sorted(key for key in os.environ if key.startswith(DRIVE_PREFIX))
    given = ", ".join(shown(key, os.environ[key]) for key in (*SHOWN, *drives) if key in os.environ)
    task, gpus = os.environ.get("ASTRAEUS_TASK", "?"), os.environ.get("ASTRAEUS_GPU_COUNT", "0")
    print(f"{task} started with {gpus} GPUs: {given}", flush=True)
    time.sleep(seconds)
    print(f"{task} done after {seconds:g} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
