"""How long `astra --help` takes from a cold process: the release's program (a PyInstaller
bundle, `bin/astra` of an unpacked tarball) beside the development venv's `astra`.

    .venv/bin/python scripts/release.py --out /tmp/dist
    mkdir /tmp/opt && tar -xzf /tmp/dist/astraeus-*-linux-*.tar.gz -C /tmp/opt --strip-components=1
    .venv/bin/python benchmarks/start_time.py --release /tmp/opt [--runs 3]

Each program runs once to warm the page cache, then `--runs` times (default 3), alternating, in
an empty environment (`env -i`, as the units start it); the figure is the median wall time, with
each run, the load average, and the median CPU time (user and system), which a busy machine
does not inflate as it does the wall time. `--release` may be given twice, e.g. an older build.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

VENV_ASTRA = Path(sys.executable).parent / "astra"


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def once(program: Path, args: list[str]) -> tuple[float, float]:
    """Seconds from start to exit of `env -i PROGRAM ARGS`, and the CPU seconds it used (user
    and system): on a shared machine the wall time waits for a core, the CPU time does not."""
    started, cpu = time.perf_counter(), _cpu()
    subprocess.run(  # noqa: S603 - a program named by the caller, fixed arguments
        ["env", "-i", str(program), *args],  # noqa: S607 - env(1) from PATH
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - started, _cpu() - cpu


def measure(
    programs: dict[str, Path], args: list[str], runs: int
) -> dict[str, list[tuple[float, float]]]:
    for program in programs.values():
        once(program, args)  # the page cache, as for a program typed all day
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in programs}
    for _ in range(runs):
        for name, program in programs.items():
            times[name].append(once(program, args))
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--release", type=Path, action="append", default=[], help="an unpacked tarball"
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--venv-astra", type=Path, default=VENV_ASTRA)
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="the venv's astra once, no release (the suite's check that this script runs)",
    )
    options = parser.parse_args(argv)
    if options.smoke:
        options.runs = 1
    elif not options.release:
        parser.error("give --release FOLDER (an unpacked tarball: see this script's text)")
    programs = {"venv": options.venv_astra}
    for folder in options.release:
        programs[f"release {folder}"] = folder / "bin" / "astra"
    load = os.getloadavg()[0]
    times = measure(programs, ["--help"], options.runs)
    print(f"astra --help, {options.runs} runs each, load average {load:.2f} (before)")
    venv = statistics.median(wall for wall, _ in times["venv"])
    venv_cpu = statistics.median(cpu for _, cpu in times["venv"])
    for name, runs in times.items():
        median = statistics.median(wall for wall, _ in runs)
        cpu = statistics.median(cpu for _, cpu in runs)
        each = ", ".join(f"{wall * 1000:.0f}" for wall, _ in runs)
        print(
            f"  {name}: median {median * 1000:.0f} ms ({each}), {median / venv:.2f}x the venv;"
            f" CPU {cpu * 1000:.0f} ms, {cpu / venv_cpu:.2f}x"
        )
    print(f"load average {os.getloadavg()[0]:.2f} (after)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
