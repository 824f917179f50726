"""Every benchmark script runs, at a tiny size, in the suite: none rots unseen again (issue 30:
`console_bench.py` placed nothing for weeks, its machines' `pool` label ignored).

Each script is run as a user would (`python benchmarks/<script> --smoke`, a new process) and must
exit 0 and print its figures' lines; the figures themselves are not judged here
(docs/benchmarks.md holds them, measured at full size). A script that needs Chromium, Slurm or
PostgreSQL skips, saying what to install, where that is missing (PostgreSQL fails instead under
`ASTRAEUS_REQUIRE_POSTGRESQL=1`, as the store's tests do). `test_every_script_has_a_smoke_entry`
keeps the table whole: a new script without an entry fails it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
REQUIRE_POSTGRESQL = "ASTRAEUS_REQUIRE_POSTGRESQL"
SLURM_TOOLS = ("slurmctld", "sbatch", "scontrol", "squeue", "munged")
LIMIT_S = 240
"""Only a hang reaches it: the slowest smoke takes under a minute on a loaded 2-core machine."""


@dataclass(frozen=True)
class Smoke:
    script: str
    args: tuple[str, ...]
    shows: tuple[str, ...]
    """Regular expressions the output must match: the lines holding the script's figures."""
    needs: str = ""
    """chromium, slurm or postgresql: what the script cannot run without."""


SMOKES = {
    "agent_bench": Smoke(
        "agent_bench.py",
        ("--smoke",),
        (r"full scan, .*: median [\d.]+ ms CPU", r"idle agent over 1 s: [\d.]+ % of a core"),
    ),
    "cli_imports": Smoke(
        "cli_imports.py",
        ("--smoke",),
        (
            r"astra --help: median \d+ ms of imports",
            r"status x: median \d+ ms .*, \d+ modules; heavy: none",
            r"run --dry-run: median \d+ ms .*, \d+ modules; heavy: none",
        ),
    ),
    "console_bench": Smoke(
        "console_bench.py",
        ("--smoke",),
        (
            r"cluster ready: [1-9]\d* of 320 GPUs in use",  # it places again
            r"map: drawn \d+ ms, painted \d+ ms",
            r"machines table: first rows painted \d+ ms",
            r"waiting run's page: its map painted \d+ ms",
        ),
        needs="chromium",
    ),
    # Another helper is changing coordinator_bench.py (and adding --smoke there): until then, its
    # own flags at a tiny size.
    "coordinator_bench": Smoke(
        "coordinator_bench.py",
        ("--sizes", "20", "--repeat", "1", "--submissions", "2", "--skip-throughput"),
        (r"done \(load",),
    ),
    "gang_bench": Smoke(
        "gang_bench.py",
        ("--smoke",),
        (r"64-GPU gang dry run\s+by class\s+median\s+[\d.]+ ms",),
    ),
    "overload_bench": Smoke(
        "overload_bench.py", ("--smoke",), (r"median of 1: accepted [\d.]+/s, p99 \d+ ms",)
    ),
    "peer_bench": Smoke(
        "peer_bench.py",
        ("--smoke",),
        (
            r"1-GPU dry run, HTTP \| [\d.]+ ms",
            r"started per second",
            r"`astra astraeus status` / `scontrol show job`, whole process \| [\d.]+ ms",
            r"`astra astraeus run --dry-run` / `sbatch --test-only`, whole process \| [\d.]+ ms",
        ),
    ),
    "placement_bench": Smoke(
        "placement_bench.py", ("--smoke",), (r"64-GPU gang dry run\s+median\s+[\d.]+ ms",)
    ),
    "policy_sim": Smoke(
        "policy_sim.py",
        ("--smoke",),
        (r"\| GPU utilisation \| [\d.]+% \|", r"\| runs started / submitted \| 40 / 40 \|"),
    ),
    "preemption_bench": Smoke(
        "preemption_bench.py",
        ("--smoke",),
        (r"20 machines\s+64-GPU run, kept state:\s+\d+ ms .* stops \d+ runs",),
    ),
    "slurm_peer": Smoke(
        "slurm_peer.py", ("--smoke",), (r"sbatch --test-only, median of 1: [\d.]+ ms",), "slurm"
    ),
    "soak_bench": Smoke(
        "soak_bench.py", ("--smoke",), (r"minute 3: service RSS [\d.]+ MB", r"service RSS after")
    ),
    "start_time": Smoke("start_time.py", ("--smoke",), (r"venv: median \d+ ms",)),
    "store_engines": Smoke(
        "store_engines.py",
        ("--smoke",),
        (r"sqlite\s+20 runs: submissions", r"postgresql 20 runs: submissions"),
        needs="postgresql",
    ),
}

NOT_SCRIPTS = {
    "coordinator_rig.py": "a module: the coordinator and fake agents the other scripts drive",
    "soak_trace.py": "started by soak_bench.py --trace as its coordinator",
}

NEVER = (" WARNING ", "ignored: access labels are set by admins")
"""Never in a smoke's output: a warning logged (console_bench once logged 5,000 of the second)."""

QUICK = {
    "cli_imports",
    "gang_bench",
    "placement_bench",
    "slurm_peer",
    "policy_sim",
    "start_time",
    "preemption_bench",
}
"""Under 10 s even at a tiny size (the others start coordinators, agents or a browser)."""


def test_every_script_has_a_smoke_entry() -> None:
    """Each script in benchmarks/ is smoke-tested here, or named as no script of its own."""
    scripts = {path.name for path in BENCHMARKS.glob("*.py")}
    covered = {smoke.script for smoke in SMOKES.values()} | set(NOT_SCRIPTS)
    assert scripts - covered == set()


def _missing(needs: str) -> str:
    """Why the script cannot run here, naming what to install; empty when it can."""
    if needs == "chromium":
        if not Path("/usr/bin/chromium").exists() and shutil.which("chromium") is None:
            return "Chromium is not installed: run .ci/console-deps (apt-get install chromium)"
        try:
            import playwright.async_api  # noqa: F401
        except ImportError:
            return "the playwright Python package is not installed: run .ci/console-deps"
    if needs == "slurm":
        absent = [tool for tool in SLURM_TOOLS if shutil.which(tool) is None]
        if absent:
            return (
                f"{', '.join(absent)} not installed (Debian, as root: apt-get install -y"
                " slurmctld slurm-client munge)"
            )
    return ""


def _run(smoke: Smoke) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / smoke.script), *smoke.args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=LIMIT_S,
        check=False,
    )


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=() if name in QUICK else pytest.mark.slow, id=name)
        for name in SMOKES
    ],
)
def test_the_benchmark_runs_at_a_tiny_size(name: str) -> None:
    """The script exits 0 and prints its figures' lines, with no warning logged."""
    smoke = SMOKES[name]
    if not (BENCHMARKS / smoke.script).exists():
        pytest.skip(f"benchmarks/{smoke.script} is not in this checkout yet")
    missing = _missing(smoke.needs)
    if missing:
        pytest.skip(missing)
    done = _run(smoke)
    output = done.stdout + done.stderr
    if smoke.needs == "postgresql" and done.returncode != 0 and "no PostgreSQL" in output:
        if os.environ.get(REQUIRE_POSTGRESQL) == "1":
            pytest.fail(f"{REQUIRE_POSTGRESQL}=1 but no PostgreSQL server: {output.strip()}")
        pytest.skip(output.strip().splitlines()[-1])
    assert done.returncode == 0, output[-4000:]
    for pattern in smoke.shows:
        assert re.search(pattern, output), (pattern, output[-4000:])
    for text in NEVER:
        assert text not in output, (text, output[-4000:])
