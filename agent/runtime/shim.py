"""The parent of one worker: starts it, waits, and writes its exit status to a file.

Run as a plain script (`python -I shim.py SPEC`), stdlib only, so it starts fast and outlives the
agent: a restarted agent reads the status file to learn how a worker ended while it was away.
SPEC is a JSON file: command, env, cwd, log, status, started, memlock.
"""

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    _own_session()
    if spec.get("memlock"):
        _raise_memlock()
    # The worker gets the signals (the agent signals the whole process group); the shim stays
    # to write down how it ended. A Python handler is reset by exec, unlike SIG_IGN.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _ignore)
    with open(spec["log"], "ab", buffering=0) as out:
        try:
            worker = subprocess.Popen(  # noqa: S603 - the assigned command, as given
                spec["command"],
                env=spec["env"],
                cwd=spec.get("cwd"),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        except OSError as error:
            code = 127 if isinstance(error, FileNotFoundError) else 126
            message = f"cannot start {spec['command'][0]}: {error.strerror}"
            out.write(f"astraeus: {message}\n".encode())
            _write(spec["status"], {"exit_code": code, "signal": None, "message": message})
            return code
        _write(spec["started"], {"pid": worker.pid, "at": time.time()})
        code = _wait(worker)
    status = {"exit_code": code if code >= 0 else None, "signal": -code if code < 0 else None}
    _write(spec["status"], {**status, "message": None})
    return code if code >= 0 else 128 - code


def _own_session() -> None:
    if getattr(sys, "frozen", False):
        # A release build's shim runs under its program's bootloader, which the agent started as
        # a session leader: stay in its process group, so the agent's signals reach the worker.
        return
    with contextlib.suppress(OSError):  # already a session leader (start_new_session, systemd)
        os.setsid()


def _raise_memlock() -> None:
    """Unlimited where allowed (root or CAP_SYS_RESOURCE), else as far as the hard limit."""
    unlimited = resource.RLIM_INFINITY
    try:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (unlimited, unlimited))
    except (ValueError, OSError):
        _, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (hard, hard))


def _wait(worker: "subprocess.Popen[bytes]") -> int:
    while True:
        try:
            return worker.wait()
        except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for old kernels
            continue


def _ignore(signum: int, frame: Any) -> None:
    """Keep the shim alive to record the worker's end; the worker got the same signal."""


def _write(path: str, data: dict[str, Any]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as out:
        json.dump(data, out)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
