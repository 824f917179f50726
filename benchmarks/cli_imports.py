"""`astra` start-up: what each command imports before it prints, from `python -X importtime`.

    .venv/bin/python benchmarks/cli_imports.py

Each case runs in a fresh interpreter three times; the figure is the median of the summed
top-level import times (what `-X importtime` calls cumulative), in milliseconds, with how many
modules it loaded (a count the machine's load does not blur), the heavy ones among them
(pydantic, aiohttp, `urllib.request`) and the server's (aiohttp's server, sqlite_utils, the
store, scheduler and engine). The commands that ask the coordinator ask a stand-in on loopback
that answers as one would (a `Run`, a `DryRun`, made with the shared models), so each loads all
it uses to print a real answer.

    .venv/bin/python benchmarks/cli_imports.py --instructions --before ../main/.venv/bin/astra

`--instructions` counts, with valgrind's callgrind, the instructions each whole `astra` process
runs (and `python -c pass`'s, for scale): a figure other programs' load does not change, so a
before/after holds on a busy machine. `--before ASTRA` counts another checkout's beside it.
"""

from __future__ import annotations

import argparse
import http.server
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

from astraeus.shared import RequestedResources, Run, RunState, Shape, Task, TaskState
from astraeus.shared.views import DryRun, WorkerView

SERVER = (
    "aiohttp.web",
    "sqlite_utils",
    "astraeus.coordinator.store",
    "astraeus.coordinator.scheduler",
    "astraeus.coordinator.placement",
    "astraeus.coordinator.api",
)
HEAVY = ("pydantic", "aiohttp", "urllib.request")
CASES = {
    "astra --help": ["--help"],
    "astra astraeus status x": ["astraeus", "status", "x"],
    "astra astraeus run --dry-run": [
        "astraeus", "run", "--name", "x", "--gpus", "1", "--dry-run", "--", "true",
    ],
}  # fmt: skip
_LINE = re.compile(r"^import time:\s+\d+ \|\s+(\d+) \| ( *)(\S+)$")


def _answers() -> dict[str, bytes]:
    """What a coordinator answers `status x` and `run --dry-run`, written by the models."""
    now = datetime.now(UTC)
    shape = Shape(tasks=1, gpus_each=1, why="1 machine × 1 GPU on gpu-00001")
    task = Task(
        name="x-0",
        run="x",
        index=0,
        state=TaskState.RUNNING,
        machine="gpu-00001",
        assigned_gpu_ids=["GPU-0"],
    )
    run = Run(
        name="x",
        workspace="bench",
        command=["true"],
        requested_resources=RequestedResources.model_validate({"gpu_requests": {"count": 1}}),
        state=RunState.RUNNING,
        shape=shape,
        tasks=[task],
        submitted_at=now,
    )
    worker = WorkerView(
        index=0, machine="gpu-00001", assigned_gpu_ids=["GPU-0"], cpu_cores=0, memory_bytes=0
    )
    dry = DryRun(would_start=True, shape=shape, workers=[worker])
    return {"GET": run.model_dump_json().encode(), "POST": dry.model_dump_json().encode()}


class _Coordinator(http.server.BaseHTTPRequestHandler):
    answers: ClassVar[dict[str, bytes]] = {}

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = self.answers[self.command]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def log_message(self, format: str, *args: object) -> None:
        return


@contextmanager
def stand_in() -> Iterator[str]:
    """A loopback server answering as a coordinator would; its URL."""
    _Coordinator.answers = _answers()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Coordinator)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def measure(argv: list[str], api: str) -> tuple[float, list[str]]:
    """Summed top-level import ms and every module loaded, in the order loaded."""
    code = f"import sys; from astraeus.coordinator.cli import main; sys.exit(main({argv!r}))"
    done = subprocess.run(  # noqa: S603 - this interpreter, fixed arguments
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "ASTRA_TOKEN": "x", "ASTRA_CONFIG": os.devnull, "ASTRA_API": api},
    )
    if done.returncode != 0:
        raise RuntimeError(f"astra {' '.join(argv)}: {done.returncode} {done.stderr[-500:]}")
    total_us, loaded = 0, []
    for line in done.stderr.splitlines():
        match = _LINE.match(line)
        if match is None:
            continue
        if not match.group(2):
            total_us += int(match.group(1))
        loaded.append(match.group(3))
    return total_us / 1000, loaded


def instructions(command: list[str], api: str) -> int:
    """The instructions `command` ran, whole process, as callgrind counts them."""
    env = {**os.environ, "ASTRA_TOKEN": "x", "ASTRA_CONFIG": os.devnull, "ASTRA_API": api}
    done = subprocess.run(  # noqa: S603 - valgrind with our own commands
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command],  # noqa: S607
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"valgrind {' '.join(command)}: {done.stderr[-1000:]}")
    return int(found.group(1))


def count_instructions(api: str, before: Path | None) -> None:
    astras = {"this": Path(sys.executable).parent / "astra"}
    if before is not None:
        astras["before"] = before
    base = instructions([sys.executable, "-c", "pass"], api)
    print(f"python -c pass: {base / 1e6:.0f} M instructions")
    for name, argv in CASES.items():
        counts = {key: instructions([str(path), *argv], api) for key, path in astras.items()}
        shown = ", ".join(f"{key} {count / 1e6:.0f} M" for key, count in counts.items())
        print(f"{name}, whole process: {shown} instructions")


def _among(loaded: list[str], roots: tuple[str, ...]) -> str:
    found = [r for r in roots if any(m == r or m.startswith(r + ".") for m in loaded)]
    return ", ".join(found) if found else "none"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--smoke", action="store_true", help="a tiny size: that it runs (the suite's smoke test)"
    )
    parser.add_argument(
        "--instructions", action="store_true", help="count each whole process's instructions"
    )
    parser.add_argument("--before", type=Path, metavar="ASTRA", help="another astra to count")
    args = parser.parse_args()
    if args.instructions and shutil.which("valgrind") is None:
        parser.error("--instructions needs valgrind (apt-get install -y valgrind)")
    repeat = 1 if args.smoke else args.repeat
    print(f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}")
    with stand_in() as api:
        for name, argv in CASES.items():
            runs = [measure(argv, api) for _ in range(repeat)]
            times = sorted(ms for ms, _ in runs)
            loaded = runs[0][1]
            print(
                f"{name}: median {statistics.median(times):.0f} ms of imports "
                f"(runs {', '.join(f'{t:.0f}' for t in times)}), {len(loaded)} modules; "
                f"heavy: {_among(loaded, HEAVY)}; server modules: {_among(loaded, SERVER)}"
            )
        if args.instructions:
            count_instructions(api, args.before)


if __name__ == "__main__":
    main()
