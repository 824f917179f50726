"""The parent of one worker: starts it as its user, waits, ends every process it started, and
writes how it ended to a file.

Run as a plain script (`python -I shim.py SPEC`), stdlib only, so it starts fast and outlives the
agent: a restarted agent reads the status file to learn how a worker ended while it was away.
The shim runs as the agent's user and the worker as its own, so a worker can neither read SPEC,
write the status file nor signal the shim.

SPEC is a JSON file: command, env, cwd, log, status, started, memlock, user (uid, gid, groups; or
null to stay the agent's user), env_file (path and values: a container's variables, written
0600 for the runtime to read), cleanup (a command run once the worker is gone, or null).

The shim is a child subreaper: a process that leaves its parent (`nohup`, `setsid`, a double
fork) is re-parented to the shim, not to init. When the worker ends, every process it started
is killed and reaped before the status is written. Signals from the agent: SIGTERM, SIGINT and
SIGHUP go on to every process the worker started; SIGUSR1 kills them all.
"""

import contextlib
import ctypes
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
KILL_ALL = signal.SIGUSR1
CLEANUP_SECONDS = 120
_libc = ctypes.CDLL(None, use_errno=True)
_early: list[int] = []
"""Signals that came before the worker existed, passed on as soon as it does."""


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    _own_session()
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    if spec.get("memlock"):
        _raise_memlock()
    for sig in FORWARDED:
        signal.signal(sig, _forward)
    signal.signal(KILL_ALL, _kill_all)
    if spec.get("env_file"):
        _write_env_file(spec["env_file"]["path"], spec["env_file"]["values"])
    with open(spec["log"], "ab", buffering=0) as out:
        try:
            worker = _start(spec, out)
        except (OSError, ValueError, subprocess.SubprocessError) as error:
            code = 127 if isinstance(error, FileNotFoundError) else 126
            why = getattr(error, "strerror", None) or str(error)
            message = f"cannot start {spec['command'][0]}: {why}"
            out.write(f"astraeus: {message}\n".encode())
            _write(spec["status"], {"exit_code": code, "signal": None, "message": message})
            return code
        for early in _early:
            _send(worker.pid, signal.SIGKILL if early == KILL_ALL else early)
        _write(spec["started"], {"pid": worker.pid, "at": time.time()})
        code = worker.returncode = _wait(worker.pid)
        end_descendants()
        _cleanup(spec.get("cleanup"), spec["env"], out)
    status = {"exit_code": code if code >= 0 else None, "signal": -code if code < 0 else None}
    _write(spec["status"], {**status, "message": None})
    return code if code >= 0 else 128 - code


def _start(spec: dict[str, Any], out: IO[bytes]) -> "subprocess.Popen[bytes]":
    user = spec.get("user")
    switch: dict[str, Any] = {}
    if user:
        # extra_groups=[] clears the agent's own supplementary groups (setgroups(0)).
        switch = {"user": user["uid"], "group": user["gid"], "extra_groups": user["groups"]}
    return subprocess.Popen(  # noqa: S603 - the assigned command, as given
        spec["command"],
        env=spec["env"],
        cwd=spec.get("cwd"),
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=subprocess.STDOUT,
        preexec_fn=_confine_switched if user else _confine,  # the shim has one thread
        **switch,
    )


def _confine() -> None:
    """In the worker, before exec: die with the shim, should the shim ever be killed."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _confine_switched() -> None:
    """As `_confine`, after the switch to the worker's user (which clears the death signal), and
    no set-uid program may give the worker back any privilege."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    _prctl(PR_SET_NO_NEW_PRIVS, 1)


def _wait(pid: int) -> int:
    """The worker's exit code (negative: the signal that ended it); reaps adopted orphans too."""
    while True:
        reaped, status = os.waitpid(-1, 0)  # EINTR is retried after a handler (PEP 475)
        if reaped == pid:
            return os.waitstatus_to_exitcode(status)


def end_descendants(proc: str = "/proc") -> None:
    """SIGKILL every process below this one and reap them, until this process has no child left.

    Orphans come to the shim (a subreaper), so no child left means nothing left: a process that
    forks while being killed leaves its child to the next round."""
    while True:
        for pid in descendants(os.getpid(), proc):
            _send(pid, signal.SIGKILL)
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return
        time.sleep(0.01)


def descendants(root: int, proc: str = "/proc") -> list[int]:
    """Every process whose chain of parents leads to `root`, from `/proc/<pid>/stat`."""
    children: dict[int, list[int]] = {}
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        try:
            with open(f"{proc}/{name}/stat") as stat:
                text = stat.read()
        except OSError:  # it ended meanwhile
            continue
        ppid = int(text[text.rindex(")") + 2 :].split()[1])  # the name may hold ") "
        children.setdefault(ppid, []).append(int(name))
    found, queue = [], [root]
    while queue:
        for child in children.get(queue.pop(), ()):
            found.append(child)
            queue.append(child)
    return found


def _forward(signum: int, frame: Any) -> None:
    """The agent asks the worker to stop: every process the worker started hears it."""
    _signal_all(signum, signum)


def _kill_all(signum: int, frame: Any) -> None:
    """The grace period is over: SIGKILL to every process the worker started."""
    _signal_all(signal.SIGKILL, signum)


def _signal_all(sig: int, asked: int) -> None:
    found = descendants(os.getpid())
    if not found:
        _early.append(asked)
    for pid in found:
        _send(pid, sig)


def _send(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _cleanup(command: list[str] | None, env: dict[str, str], out: IO[bytes]) -> None:
    """E.g. `docker rm --force NAME`: a container runs under the engine's daemon, not below us."""
    if not command:
        return
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(  # noqa: S603 - the agent's own command
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=out,
            timeout=CLEANUP_SECONDS,
            check=False,
        )


def _write_env_file(path: str, values: dict[str, str]) -> None:
    """`NAME=VALUE` lines, readable by the agent's user only (values never contain a newline:
    the agent refuses those before it gets here)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(fd, "w") as out:
        out.writelines(f"{name}={value}\n" for name, value in values.items())


def _own_session() -> None:
    if getattr(sys, "frozen", False):
        # A release build's shim runs under its program's bootloader, which the agent started as
        # a session leader: stay in its process group, so the agent's signals reach the worker.
        return
    with contextlib.suppress(OSError):  # already a session leader (start_new_session, systemd)
        os.setsid()


def _prctl(option: int, value: int) -> None:
    if _libc.prctl(option, value, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl({option}): {os.strerror(errno)}")


def _raise_memlock() -> None:
    """Unlimited where allowed (root or CAP_SYS_RESOURCE), else as far as the hard limit."""
    unlimited = resource.RLIM_INFINITY
    try:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (unlimited, unlimited))
    except (ValueError, OSError):
        _, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (hard, hard))


def _write(path: str, data: dict[str, Any]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as out:
        json.dump(data, out)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
