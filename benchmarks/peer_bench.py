"""Astraeus and Slurm asked the same questions about the same cluster, in the same run.

    apt-get update && apt-get install -y slurmctld slurm-client munge   # Debian's Slurm, as root
    .venv/bin/python benchmarks/peer_bench.py --nodes 5000
    .venv/bin/python benchmarks/peer_bench.py --nodes 1000 --repeat 1 --queued 500 --window 40

Each repetition starts a fresh `astraeus-coordinator` over `--nodes` machines of 8 GPUs
(`coordinator_rig.py`) and a fresh `slurmctld` over as many `CLOUD` nodes of 8 GPUs
(`slurm_peer.py`), and asks both:

- would a 1-GPU run start, and where: Astraeus over HTTP (`POST /api/v1/runs?dry_run=1`) and
  from its CLI (`astra astraeus run --dry-run`, a new process each time, like `sbatch`); Slurm
  with `sbatch --test-only -N1 --gres=gpu:1`;
- the same for a 64-GPU gang: 8 machines of 8 (`-N8 --gres=gpu:8`);
- a run no machine can take, 9 GPUs on one machine (`-N1 --gres=gpu:9`; Astraeus
  `min_per_machine: 9`, answered with `explain=grouped`, reasons and counts);
- 1-GPU runs started per second with `--queued` waiting (a stored queue for Astraeus, a job
  array for Slurm, each with its default settings), until all have started or `--window` ends;
- the commands users type all day, each a whole new process timed by `hyperfine` (`--shell=none`,
  3 warm-up runs, then `--runs`; its median): `astra astraeus status NAME` beside
  `scontrol show job ID` (a held job), and `astra astraeus run --dry-run` beside
  `sbatch --test-only`. `--before PATH` times another `astra` (an older checkout's) in the same
  run, for a before/after on the same machine in the same minute. Without `hyperfine`
  (`apt-get install -y hyperfine`) the script says so and times the processes itself.

Slurm 22.05's REST daemon has no will-run endpoint, so `sbatch --test-only` is Slurm's answer to
both the API and the CLI question. Every figure is the median of `--repeat` runs (three by
default), printed with the load average; the ratio is Astraeus / Slurm (for times, below 1:
Astraeus is faster; for the rate, above 1: Astraeus starts more runs a second). Without Slurm
installed the script measures Astraeus alone and says why.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from coordinator_bench import cli_dry_run, http_dry_run, machine
from coordinator_rig import ASTRA, GANG, ONE_GPU, Cluster, Coordinator, load
from slurm_peer import RunningSlurm, SlurmPeer

NONE_FITS: dict[str, Any] = {
    "name": "n",
    "command": ["x"],
    "requested_resources": {"gpu_requests": {"count": 9, "min_per_machine": 9}},
}
QUESTIONS = (
    ("1-GPU dry run, HTTP", "one"),
    ("1-GPU dry run, CLI", "cli"),
    ("64-GPU gang dry run, HTTP", "gang"),
    ("run no machine can take, HTTP, grouped", "none"),
    ("1-GPU runs started per second", "rate"),
    ("`astra astraeus status` / `scontrol show job`, whole process", "status"),
    ("`astra astraeus run --dry-run` / `sbatch --test-only`, whole process", "dry"),
)
SLURM_OF = {
    "one": "one",
    "cli": "one",
    "gang": "gang",
    "none": "none",
    "rate": "rate",
    "status": "show",
    "dry": "test",
}
SHOWN: dict[str, Any] = {
    "name": "shown",
    "command": ["x"],
    "requested_resources": {"gpu_requests": {"count": 1}},
}
"""The run `astra astraeus status shown` asks about (placed: one worker, one GPU)."""
HYPERFINE = shutil.which("hyperfine")
RUNS = 20
"""Runs of each whole-process command (after 3 warm-up runs), of which the median counts."""


def whole_process_ms(
    commands: dict[str, list[str]], env: dict[str, str], runs: int
) -> dict[str, float]:
    """Each command's median wall time in ms, a new process each run: `hyperfine` where it is
    installed (no shell between it and the command), else this script's own timer; and, as
    `<key> cpu`, the mean CPU time (user + system) of a run, which other programs' load blurs
    less than the wall time. A command that fails stops the benchmark (a fast error is not an
    answer)."""
    if HYPERFINE is None:
        found: dict[str, float] = {}
        for key, command in commands.items():
            found[key], found[f"{key} cpu"] = _own_timer(command, env, runs)
        return found
    with tempfile.TemporaryDirectory() as directory:
        out = Path(directory) / "hyperfine.json"
        names = [arg for key in commands for arg in ("--command-name", key)]
        done = subprocess.run(  # noqa: S603 - hyperfine with our own commands
            [
                HYPERFINE,
                "--shell=none",
                "--warmup",
                "3",
                "--runs",
                str(runs),
                "--style",
                "none",
                "--export-json",
                str(out),
                *names,
                *(shlex.join(command) for command in commands.values()),
            ],
            env=env,
            capture_output=True,
            check=False,
        )
        if done.returncode != 0:  # its outlier warnings are not news: the load is printed
            raise RuntimeError(f"hyperfine: {done.stderr.decode()[-2000:]}")
        results = json.loads(out.read_text())["results"]
    found = {result["command"]: result["median"] * 1000 for result in results}
    for result in results:
        found[f"{result['command']} cpu"] = (result["user"] + result["system"]) * 1000
    return found


def _own_timer(command: list[str], env: dict[str, str], runs: int) -> tuple[float, float]:
    """Median wall ms of `runs` runs after 3 warm-up runs, and their mean CPU ms."""
    took = []
    for i in range(runs + 3):
        if i == 3:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, check=False)  # noqa: S603
        took.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise RuntimeError(f"{shlex.join(command)}: {done.returncode} {done.stderr.decode()}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return statistics.median(took[3:]) * 1000, cpu / runs * 1000


def astra_commands(astra: Path) -> dict[str, list[str]]:
    return {
        "status": [str(astra), "astraeus", "status", "shown"],
        "dry": [str(astra), "astraeus", "run", "--name", "probe", "--gpus", "1", "--dry-run",
                "--", "true"],
    }  # fmt: skip


async def astraeus_cli(c: Coordinator, before: Path | None, runs: int) -> dict[str, float]:
    """`status` and `run --dry-run` as whole processes, with `before`'s beside them."""
    await c.call("POST", "/api/v1/runs?workspace=bench", c.cluster.member, SHOWN)
    env = {
        **os.environ,
        "ASTRA_API": c.base,
        "ASTRA_TOKEN": c.cluster.member,
        "ASTRA_WORKSPACE": "bench",
        "ASTRA_CONFIG": os.devnull,
    }
    commands = astra_commands(ASTRA)
    if before is not None:
        commands |= {f"{key} before": argv for key, argv in astra_commands(before).items()}
    return await asyncio.to_thread(whole_process_ms, commands, env, runs)


def slurm_cli(running: RunningSlurm, runs: int) -> dict[str, float]:
    """`scontrol show job` of a held job and `sbatch --test-only`, as whole processes."""
    held = subprocess.run(  # noqa: S603 - our own arguments
        [running.tools["sbatch"], "--hold", "--parsable", "--gres=gpu:1", "-N1", "--wrap", "true"],
        env=running.env,
        capture_output=True,
        check=True,
    )
    job = held.stdout.decode().strip().split(";")[0]
    sbatch = [running.tools["sbatch"], "--test-only", "--gres=gpu:1", "-N1", "--wrap", "true"]
    commands = {"show": [running.tools["scontrol"], "show", "job", job], "test": sbatch}
    return whole_process_ms(commands, running.env, runs)


async def refused_dry_run(c: Coordinator, count: int) -> float:
    """Median ms of `count` dry runs of a run no machine can take, explanation grouped."""
    took = []
    for _ in range(count):
        started = time.perf_counter()
        path = "/api/v1/runs?dry_run=1&explain=grouped"
        answer = await c.call("POST", path, c.cluster.member, NONE_FITS)
        took.append(time.perf_counter() - started)
        if answer["would_start"]:
            raise RuntimeError(f"a 9-GPU machine was found: {answer}")
    return statistics.median(took) * 1000


async def astraeus_rate(cluster: Cluster, queued: int, window: float) -> float:
    """Runs placed and committed per second from the service's first answer until the queue is
    empty (runs placed before that answer are not counted)."""
    async with Coordinator(cluster) as c:
        started = time.perf_counter()
        before = c.placed()
        placed, last = before, started
        while time.perf_counter() - started < window and placed < queued:
            await asyncio.sleep(0.1)
            now = c.placed()
            if now > placed:
                placed, last = now, time.perf_counter()
    return (placed - before) / max(last - started, 1e-9)


async def astraeus_once(
    nodes: int, queued: int, window: float, before: Path | None, runs: int
) -> dict[str, float]:
    idle = Cluster(nodes)
    try:
        async with Coordinator(idle) as c:
            await asyncio.sleep(3)  # the first pass after the start is over
            figures = {
                "one": await http_dry_run(c, 20, ONE_GPU),
                "cli": await asyncio.to_thread(cli_dry_run, c, 5),
                "gang": await http_dry_run(c, 20, GANG),
                "none": await refused_dry_run(c, 20),
                **await astraeus_cli(c, before, runs),
            }
    finally:
        idle.remove()
    waiting = Cluster(nodes, queued=queued)
    try:
        figures["rate"] = await astraeus_rate(waiting, queued, window)
    finally:
        waiting.remove()
    return figures


def slurm_once(
    peer: SlurmPeer, nodes: int, queued: int, window: float, runs: int
) -> dict[str, float]:
    with peer.cluster(nodes) as running:
        figures = _will_run(running) | slurm_cli(running, runs)
    with peer.cluster(nodes) as running:
        figures["rate"] = running.started_per_second(queued, window)
    return figures


def _will_run(running: RunningSlurm) -> dict[str, float]:
    return {
        "one": running.test_only_ms(20),
        "gang": running.test_only_ms(20, gpus=8, nodes=8),
        "none": running.test_only_ms(20, gpus=9, refused=True),
    }


def report(runs: dict[str, list[dict[str, float]]]) -> None:
    print("| question | Astraeus | Slurm | Astraeus / Slurm |")
    print("| --- | --- | --- | --- |")
    for label, key in QUESTIONS:
        ours = _median(runs["astraeus"], key)
        unit = "/s" if key == "rate" else " ms"
        theirs = _median(runs["slurm"], SLURM_OF[key]) if runs["slurm"] else None
        ratio = f"{ours / theirs:.2f}" if theirs else "—"
        shown = f"{theirs:.1f}{unit}" if theirs is not None else "not measured"
        if f"{key} cpu" in runs["astraeus"][0]:  # a whole process: its CPU time beside
            cpu = _median(runs["slurm"], f"{SLURM_OF[key]} cpu") if runs["slurm"] else None
            shown += f" (CPU {cpu:.1f} ms)" if cpu is not None else ""
            print(f"| {label} | {ours:.1f}{unit} {_cpu(runs, key)} | {shown} | {ratio} |")
        else:
            print(f"| {label} | {ours:.1f}{unit} | {shown} | {ratio} |")
        if f"{key} before" in runs["astraeus"][0]:
            old = _median(runs["astraeus"], f"{key} before")
            ratio = f"{old / theirs:.2f}" if theirs else "—"
            old_cpu = _cpu(runs, f"{key} before")
            print(
                f"| {label}, before (`--before`) | {old:.1f}{unit} {old_cpu} | {shown} | {ratio} |"
            )


def _cpu(runs: dict[str, list[dict[str, float]]], key: str) -> str:
    return f"(CPU {_median(runs['astraeus'], f'{key} cpu'):.1f} ms)"


def _median(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(run[key] for run in runs)


def _each(label: str, figures: dict[str, float]) -> None:
    shown = ", ".join(f"{key} {value:.1f}" for key, value in figures.items())
    print(f"  {label}: {shown} ({load()})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--queued", type=int, default=2000, help="1-GPU runs for the rate")
    parser.add_argument("--window", type=float, default=60.0, help="longest rate run, seconds")
    parser.add_argument(
        "--runs", type=int, default=RUNS, help="runs of each whole-process command (its median)"
    )
    parser.add_argument(
        "--before",
        type=Path,
        metavar="ASTRA",
        help="another astra to time beside this one (an older checkout's .venv/bin/astra)",
    )
    parser.add_argument(
        "--smoke", action="store_true", help="a tiny size: that it runs (the suite's smoke test)"
    )
    args = parser.parse_args()
    if args.smoke:
        args.nodes, args.repeat, args.queued, args.window, args.runs = 20, 1, 10, 20.0, 3
    print(machine(), flush=True)
    peer = SlurmPeer.find()
    if peer is None:
        print(f"Slurm: skipped, {SlurmPeer.missing()}")
    if HYPERFINE is None or peer is None:
        missing = " and ".join(
            name for name, found in (("hyperfine", HYPERFINE), ("Slurm", peer)) if found is None
        )
        print(
            f"Not run: hyperfine/Slurm missing ({missing} not installed); Astraeus's whole-process"
            " times by this script's own timer"
        )
    runs: dict[str, list[dict[str, float]]] = {"astraeus": [], "slurm": []}
    for i in range(args.repeat):
        ours = asyncio.run(
            astraeus_once(args.nodes, args.queued, args.window, args.before, args.runs)
        )
        runs["astraeus"].append(ours)
        _each(f"Astraeus run {i + 1}", ours)
        if peer is not None:
            theirs = slurm_once(peer, args.nodes, args.queued, args.window, args.runs)
            runs["slurm"].append(theirs)
            _each(f"Slurm run {i + 1}", theirs)
    print(f"== {args.nodes} machines, median of {args.repeat} ({load()})")
    report(runs)


if __name__ == "__main__":
    main()
