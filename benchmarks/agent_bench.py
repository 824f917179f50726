"""Agent speed: CPU time of a full scan of an 8-GPU, 8-port fake machine, and the CPU and
resident memory of an idle `astraeus-agent serve` process.

Targets: a scan ≤ 10 ms of CPU (issue 29; issue 4 asked ≤ 20 ms); an idle agent ≤ 1 % of a
core and ≤ 80 MB resident (issue 4).

The scan's figure includes the fake NVML module's own work (a real agent pays the driver's
instead). A second pass splits it: every function of the fake module is timed (CPU) where the
agent calls it, and the rest of the scan is the agent's own code (its sysfs and /proc reads
included: the fake machine's tree is real files, read as /sys would be).

A third pass scans through the REAL pynvml over `nvml_stub.c`, a stand-in libnvidia-ml that
answers at once as an idle 8-GPU H100 box (built with `cc`; skipped, saying so, without one):
the real path's Python cost (pynvml's wrappers, ctypes, the agent's code) with the driver's own
time left out; host interfaces from this machine's getifaddrs, the rest from the fake tree.
CPU figures include child processes' (a scan should start none).

    .venv/bin/python benchmarks/agent_bench.py [--scans 200] [--idle-seconds 30]
"""

import argparse
import ctypes
import functools
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from astraeus.agent.fake import load_fake_machine
from astraeus.agent.fake.nvml import FakeNvml
from astraeus.agent.inventory import Scanner

CLK_TCK = os.sysconf("SC_CLK_TCK")


def scan_cpu_ms(scans: int) -> list[float]:
    """CPU milliseconds of each full scan of the h100-sxm fake machine (8 GPUs, 8 ports)."""
    return [total for total, _ in _scans(scans, split=False)]


def scan_split_ms(scans: int) -> list[tuple[float, float]]:
    """`(scan, inside the fake NVML module)` CPU milliseconds of each full scan."""
    return _scans(scans, split=True)


def _scans(scans: int, *, split: bool) -> list[tuple[float, float]]:
    with tempfile.TemporaryDirectory() as data:
        scanner = Scanner(name="", backend="fake:h100-sxm", data_dir=Path(data))
        inside = [0.0]
        if split:
            _time_fake_calls(scanner, inside)
        for _ in range(10):  # warm up: first scans register events and fill caches
            scanner.scan()
        times = _timed_scans(scanner, scans, inside)
        scanner.close()
    return times


def _timed_scans(scanner: Scanner, scans: int, inside: list[float]) -> list[tuple[float, float]]:
    times = []
    for _ in range(scans):
        inside[0] = 0.0
        start = _cpu()
        report = scanner.scan()
        times.append(((_cpu() - start) * 1000, inside[0] * 1000))
    if (len(report.gpus), len(report.rdma_ports)) != (8, 8):
        raise RuntimeError("the scan should find 8 GPUs and 8 ports")
    return times


def _cpu() -> float:
    """CPU seconds of this process and its finished children (a scan should start none)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def stub_nvml_ms(scans: int) -> list[float] | None:
    """CPU milliseconds of each full scan through the real pynvml over the stub libnvidia-ml
    (`nvml_stub.c`); None where no C compiler builds it."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    import pynvml  # type: ignore[import-untyped]

    with tempfile.TemporaryDirectory() as data:
        library = Path(data) / "libnvidia-ml-stub.so"
        source = Path(__file__).with_name("nvml_stub.c")
        # our own compiler call on our own source, argv list, no shell
        subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(library), str(source)],  # noqa: S603
                       check=True)  # fmt: skip
        loaded, pynvml.nvmlLib = pynvml.nvmlLib, ctypes.CDLL(str(library))
        try:
            tree = load_fake_machine("h100-sxm").write_tree(Path(data) / "tree")
            scanner = Scanner(name="stub", backend="nvml", sysfs_root=tree / "sys",
                              proc_root=tree / "proc", dev_root=tree / "dev",
                              data_dir=Path(data) / "state")  # fmt: skip
            if scanner.backend.name != "nvml":
                raise RuntimeError(f"the stub NVML did not open: {scanner.backend.detail}")
            for _ in range(10):
                scanner.scan()
            times = [total for total, _ in _timed_scans(scanner, scans, [0.0])]
            scanner.close()
        finally:
            pynvml.nvmlLib = loaded
            pynvml._nvmlGetFunctionPointer_cache.clear()  # the stub's functions, kept by pynvml
    return times


def _time_fake_calls(scanner: Scanner, inside: list[float]) -> None:
    """Wrap every `nvml*` function of the scanner's fake NVML module to add its CPU time to
    `inside[0]` (the wrappers' own cost, about a microsecond a call, falls to the agent)."""
    lib = getattr(scanner.backend, "lib", None)
    if not isinstance(lib, FakeNvml):
        raise RuntimeError("the h100-sxm fake machine should be read through the fake NVML")
    for name in [n for n in vars(FakeNvml) if n.startswith("nvml")]:
        setattr(lib, name, _timed(getattr(lib, name), inside))


def _timed(fn: Callable[..., Any], inside: list[float]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def timed(*args: Any) -> Any:
        start = time.process_time()
        try:
            return fn(*args)
        finally:
            inside[0] += time.process_time() - start

    return timed


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def idle_agent(seconds: float) -> tuple[float, float]:
    """(percent of one core, resident MB) of `serve` on the h100-sxm fake, after it settles."""
    with tempfile.TemporaryDirectory() as data:
        command = [sys.executable, "-m", "astraeus.agent.cli", "serve", "--backend",
                   "fake:h100-sxm", "--port", "0", "--data-dir", data]  # fmt: skip
        # our own command, argv list, no shell
        with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as agent:  # noqa: S603
            try:
                if agent.stdout is not None:
                    agent.stdout.readline()  # serving: the first scan is done
                time.sleep(3)
                cpu0, wall0 = _cpu_seconds(agent.pid), time.monotonic()
                time.sleep(seconds)
                cpu1, wall1 = _cpu_seconds(agent.pid), time.monotonic()
                rss = _rss_mb(agent.pid)
            finally:
                agent.terminate()
    return 100 * (cpu1 - cpu0) / (wall1 - wall0), rss


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scans", type=int, default=200)
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    parser.add_argument(
        "--smoke", action="store_true", help="a tiny size: that it runs (the suite's smoke test)"
    )
    args = parser.parse_args()
    if args.smoke:
        args.scans, args.idle_seconds = 5, 1.0
    print(f"load average {os.getloadavg()[0]:.2f} (1 min)")
    times = sorted(scan_cpu_ms(args.scans))
    p95 = times[int(len(times) * 0.95) - 1]
    print(f"full scan, 8 GPUs + 8 ports (fake h100-sxm), {args.scans} scans: "
          f"median {statistics.median(times):.2f} ms CPU, p95 {p95:.2f} ms, "
          f"max {times[-1]:.2f} ms (target ≤ 10 ms)")  # fmt: skip
    split = scan_split_ms(args.scans)
    whole = statistics.median(total for total, _ in split)
    fake = statistics.median(inside for _, inside in split)
    agent = statistics.median(total - inside for total, inside in split)
    print(f"  split (second pass, fake NVML calls timed): scan {whole:.2f} ms, of which the "
          f"fake NVML module {fake:.2f} ms ({100 * fake / whole:.0f} %), "
          f"the agent's own code {agent:.2f} ms")  # fmt: skip
    stub = stub_nvml_ms(args.scans)
    if stub is None:
        print("real pynvml over the stub libnvidia-ml: skipped, no C compiler (cc) here")
    else:
        stub.sort()
        print(f"real pynvml over the stub libnvidia-ml (driver time left out), {args.scans} "
              f"scans: median {statistics.median(stub):.2f} ms CPU, "
              f"p95 {stub[int(len(stub) * 0.95) - 1]:.2f} ms")  # fmt: skip
    cpu, rss = idle_agent(args.idle_seconds)
    print(f"idle agent over {args.idle_seconds:g} s: {cpu:.2f} % of a core (target ≤ 1 %), "
          f"{rss:.0f} MB resident (target ≤ 80 MB)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
