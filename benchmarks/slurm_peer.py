"""Slurm beside Astraeus: Debian's `slurm-wlm` `slurmctld` with N `CLOUD` nodes on loopback,
asked "when and where would this start" with `sbatch --test-only`.

    .venv/bin/python benchmarks/slurm_peer.py --nodes 5000        # prints the median, or why not

CLOUD nodes need no slurmd: the controller plans on them as if they could be resumed (its
`ResumeProgram` is `/bin/true`), which is what a will-run question needs. Slurm authenticates
with MUNGE: the helper starts a private `munged` (its own key and socket in the temporary
directory) when no MUNGE socket answers. Everything runs as the current user, from a temporary
directory that is removed afterwards. When `slurmctld`, `sbatch` or `munged` is not installed,
`SlurmPeer.find()` is None and `SlurmPeer.missing()` says what to install.

`sbatch --test-only` prints (Slurm's `src/sbatch/sbatch.c`):
    sbatch: Job 3 to start at 2026-12-03T10:00:00 using 1 processors on nodes n00001 in
    partition gpu
or, for one no node can take, `allocation failure: Requested node configuration is not available`
(what 22.05 printed here for `-N1 --gres=gpu:9`; older releases write `sbatch: error: Job
submit/allocate failed: ...`). `parse_test_only` reads all three.

`RunningSlurm.started_per_second` submits a job array (`MaxArraySize` is raised so that one
array holds the whole queue) and counts the elements that leave PENDING
with Slurm's default scheduler settings (the main scheduler starts at most
`default_queue_depth=100` jobs a pass; the backfill scheduler runs every `bf_interval=30` s).
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import os
import re
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

WILL_RUN = re.compile(
    r"Job (?P<job>\d+) to start at (?P<start>\S+) using (?P<processors>\d+) processors on nodes"
    r" (?P<nodes>\S+)(?: in partition (?P<partition>\S+))?"
)
ERROR = re.compile(r"(?:sbatch: error|allocation failure): (?P<error>.+)")


@dataclass(frozen=True)
class WillRun:
    """Slurm's answer: when and where the job would start, or why it cannot."""

    start: str | None = None
    nodes: str | None = None
    processors: int = 0
    partition: str | None = None
    error: str | None = None


def parse_test_only(text: str) -> WillRun:
    """`sbatch --test-only`'s stderr as a `WillRun`; ValueError for anything else."""
    found = WILL_RUN.search(text)
    if found is not None:
        return WillRun(
            start=found["start"],
            nodes=found["nodes"],
            processors=int(found["processors"]),
            partition=found["partition"],
        )
    failed = ERROR.search(text)
    if failed is not None:
        return WillRun(error=failed["error"].strip())
    raise ValueError(f"not an answer of sbatch --test-only: {text.strip()[:200]!r}")


def slurm_conf(directory: Path, nodes: int, port: int, user: str, munge_socket: Path) -> str:
    """A controller on 127.0.0.1 with `nodes` CLOUD nodes of 128 cores and 8 GPUs each."""
    names = f"n[00001-{nodes:05}]"
    return "\n".join(
        [
            "ClusterName=astraeusbench",
            "SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={port}",
            f"SlurmdPort={port + 1}",
            f"SlurmUser={user}",
            f"AuthInfo=socket={munge_socket}",
            f"StateSaveLocation={directory / 'state'}",
            f"SlurmdSpoolDir={directory / 'spool'}",
            f"SlurmctldPidFile={directory / 'slurmctld.pid'}",
            f"SlurmctldLogFile={directory / 'slurmctld.log'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "GresTypes=gpu",
            "SchedulerType=sched/backfill",
            "ResumeProgram=/bin/true",
            "SuspendProgram=/bin/true",
            "SuspendTime=600",
            "ResumeTimeout=300",
            "TreeWidth=65533",
            "ReturnToService=2",
            "MaxArraySize=100001",
            f"NodeName={names} State=CLOUD CPUs=128 RealMemory=2000000 Gres=gpu:8",
            "PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


class SlurmPeer:
    """The installed Slurm tools."""

    TOOLS = ("slurmctld", "sbatch", "scontrol", "squeue", "munged")

    def __init__(self, tools: dict[str, str]) -> None:
        self.tools = tools

    @classmethod
    def find(cls) -> SlurmPeer | None:
        tools = {tool: shutil.which(tool) for tool in cls.TOOLS}
        if any(path is None for path in tools.values()):
            return None
        return cls({tool: path for tool, path in tools.items() if path is not None})

    @classmethod
    def missing(cls) -> str:
        absent = [tool for tool in cls.TOOLS if shutil.which(tool) is None]
        return (
            f"{', '.join(absent)} not installed (Debian, as root: apt-get update &&"
            " apt-get install -y slurmctld slurm-client munge)"
        )

    @contextlib.contextmanager
    def cluster(self, nodes: int) -> Iterator[RunningSlurm]:
        directory = Path(tempfile.mkdtemp(prefix="astraeus-slurm-"))
        processes: list[subprocess.Popen[bytes]] = []
        try:
            munge_socket = self._munge(directory, processes)
            for sub in ("state", "spool"):
                (directory / sub).mkdir()
            conf = directory / "slurm.conf"
            conf.write_text(
                slurm_conf(directory, nodes, _free_port(), getpass.getuser(), munge_socket)
            )
            (directory / "gres.conf").write_text(f"NodeName=n[00001-{nodes:05}] Name=gpu Count=8\n")
            env = {**os.environ, "SLURM_CONF": str(conf)}
            processes.append(
                subprocess.Popen(  # noqa: S603 - our own arguments
                    [self.tools["slurmctld"], "-D", "-i", "-f", str(conf)],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            running = RunningSlurm(self.tools, env)
            running.wait_ready(directory)
            yield running
        finally:
            for process in reversed(processes):
                process.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(10)
            shutil.rmtree(directory, ignore_errors=True)

    def _munge(self, directory: Path, processes: list[subprocess.Popen[bytes]]) -> Path:
        """A private munged with a fresh key; its socket."""
        key = directory / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        sock = directory / "munge.socket"
        processes.append(
            subprocess.Popen(  # noqa: S603 - our own arguments
                [
                    self.tools["munged"],
                    "--foreground",
                    "--force",
                    f"--key-file={key}",
                    f"--socket={sock}",
                    f"--pid-file={directory / 'munged.pid'}",
                    f"--log-file={directory / 'munged.log'}",
                    f"--seed-file={directory / 'munged.seed'}",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        for _ in range(100):
            if sock.exists():
                return sock
            time.sleep(0.05)
        raise RuntimeError(f"munged did not start: see {directory / 'munged.log'}")


class RunningSlurm:
    def __init__(self, tools: dict[str, str], env: dict[str, str]) -> None:
        self.tools = tools
        self.env = env

    def wait_ready(self, directory: Path) -> None:
        for _ in range(600):
            ping = subprocess.run(  # noqa: S603
                [self.tools["scontrol"], "ping"], env=self.env, capture_output=True, check=False
            )
            if b"UP" in ping.stdout:
                return
            time.sleep(0.1)
        raise RuntimeError(f"slurmctld did not start: see {directory / 'slurmctld.log'}")

    def test_only(self, gpus: int = 1, nodes: int = 1) -> WillRun:
        """Slurm's will-run answer for `nodes` machines with `gpus` GPUs each."""
        ask = ["--test-only", f"--gres=gpu:{gpus}", f"-N{nodes}", "--wrap", "true"]
        done = subprocess.run(  # noqa: S603
            [self.tools["sbatch"], *ask],
            env=self.env,
            capture_output=True,
            check=False,
        )
        return parse_test_only(done.stderr.decode(errors="replace"))

    def test_only_ms(
        self, count: int, gpus: int = 1, nodes: int = 1, refused: bool = False
    ) -> float:
        """Median milliseconds of `count` will-run questions; each answer must be a start
        (or, with `refused`, a refusal), never the other."""
        took = []
        for _ in range(count):
            started = time.perf_counter()
            answer = self.test_only(gpus, nodes)
            took.append(time.perf_counter() - started)
            if (answer.error is not None) != refused:
                raise RuntimeError(f"sbatch --test-only -N{nodes} --gres=gpu:{gpus}: {answer}")
        return statistics.median(took) * 1000

    def started_per_second(self, queued: int, window: float) -> float:
        """Submit an array of `queued` 1-GPU jobs; jobs that left PENDING per second, from the
        submission to the last start seen within `window` seconds."""
        array = [f"--array=1-{queued}", "--gres=gpu:1", "-N1", "--wrap", "true"]
        done = subprocess.run(  # noqa: S603
            [self.tools["sbatch"], *array], env=self.env, capture_output=True, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"sbatch {' '.join(array)}: {done.stderr.decode().strip()}")
        started_at = time.perf_counter()
        started, last = 0, started_at
        while time.perf_counter() - started_at < window and started < queued:
            time.sleep(0.5)
            now = queued - self.pending()
            if now > started:
                started, last = now, time.perf_counter()
        return started / max(last - started_at, 1e-9)

    def pending(self) -> int:
        """Jobs (array elements counted one by one) still PENDING."""
        done = subprocess.run(  # noqa: S603
            [self.tools["squeue"], "-h", "-r", "-t", "PD", "-o", "%i"],
            env=self.env,
            capture_output=True,
            check=True,
        )
        return len(done.stdout.split())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--count", type=int, default=5)
    parser.add_argument(
        "--smoke", action="store_true", help="a tiny size: that it runs (the suite's smoke test)"
    )
    args = parser.parse_args()
    if args.smoke:
        args.nodes, args.count = 10, 1
    peer = SlurmPeer.find()
    if peer is None:
        print(f"Slurm: skipped, {SlurmPeer.missing()}")
        return
    with peer.cluster(args.nodes) as running:
        print(f"Slurm at {args.nodes} CLOUD nodes: {running.test_only()}")
        print(
            f"sbatch --test-only, median of {args.count}: {running.test_only_ms(args.count):.1f} ms"
        )


if __name__ == "__main__":
    main()
