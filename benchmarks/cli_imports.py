"""`astra` start-up: what each command imports before it prints, from `python -X importtime`.

    .venv/bin/python benchmarks/cli_imports.py

Each case runs in a fresh interpreter three times; the figure is the median of the summed
top-level import times (what `-X importtime` calls cumulative), in milliseconds, and the modules
of the server (aiohttp's server, sqlite_utils, the store, scheduler and engine) it loaded. The
status case asks a closed loopback port, so it imports all it would use and then fails.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys

SERVER = (
    "aiohttp.web",
    "sqlite_utils",
    "astraeus.coordinator.store",
    "astraeus.coordinator.scheduler",
    "astraeus.coordinator.placement",
    "astraeus.coordinator.api",
)
CASES = {
    "astra --help": ["--help"],
    "astra astraeus status x": ["astraeus", "status", "x", "--api", "http://127.0.0.1:9"],
}
_LINE = re.compile(r"^import time:\s+\d+ \|\s+(\d+) \| ( *)(\S+)$")


def measure(argv: list[str]) -> tuple[float, list[str]]:
    code = f"import sys; from astraeus.coordinator.cli import main; sys.exit(main({argv!r}))"
    done = subprocess.run(  # noqa: S603 - this interpreter, fixed arguments
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "ASTRA_TOKEN": "x", "ASTRA_CONFIG": os.devnull},
    )
    total_us, loaded = 0, []
    for line in done.stderr.splitlines():
        match = _LINE.match(line)
        if match is None:
            continue
        if not match.group(2):
            total_us += int(match.group(1))
        loaded.append(match.group(3))
    server = [s for s in SERVER if any(m == s or m.startswith(s + ".") for m in loaded)]
    return total_us / 1000, server


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--smoke", action="store_true", help="a tiny size: that it runs (the suite's smoke test)"
    )
    args = parser.parse_args()
    repeat = 1 if args.smoke else args.repeat
    print(f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}")
    for name, argv in CASES.items():
        runs = [measure(argv) for _ in range(repeat)]
        times = sorted(ms for ms, _ in runs)
        server = runs[0][1]
        print(
            f"{name}: median {statistics.median(times):.0f} ms of imports "
            f"(runs {', '.join(f'{t:.0f}' for t in times)}); "
            f"server modules: {', '.join(server) if server else 'none'}"
        )


if __name__ == "__main__":
    main()
