"""One process per GPU of this worker, started by hand (what torchrun does for you):
`per_gpu.py SCRIPT [ARGS...]` runs `SCRIPT` once per GPU (once without GPUs) with the world
counted in processes. Every worker of a run has the same number of GPUs (the shape is even)."""

import os
import subprocess
import sys


def main() -> int:
    per_worker = max(1, int(os.environ["ASTRAEUS_GPU_COUNT"]))
    workers, worker = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    procs = []
    for local in range(per_worker):
        env = {
            **os.environ,
            "RANK": str(worker * per_worker + local),
            "WORLD_SIZE": str(workers * per_worker),
            "LOCAL_RANK": str(local),
            "LOCAL_WORLD_SIZE": str(per_worker),
        }
        procs.append(subprocess.Popen([sys.executable, *sys.argv[1:]], env=env))  # noqa: S603
    codes = [proc.wait() for proc in procs]
    return next((code for code in codes if code), 0)


if __name__ == "__main__":
    sys.exit(main())
