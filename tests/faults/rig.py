"""Real processes for fault tests: a coordinator, agents with fake machines, workers that say
when they start and stop, and a TCP proxy that can cut an agent off (a partition).

Windows are shortened by settings (`FAST`), so an outage longer than the Lost grace takes
seconds. Waits poll with a generous deadline that only a hang reaches: nothing here asserts how
fast anything is.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import weakref
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers import hold_port, until

from astraeus.shared import SCHEMA_VERSION
from astraeus.shared.fake_gpu import gpu_uuid

BIN = Path(sys.executable).parent
DEADLINE_SECONDS = 60.0

DOWN_AFTER = 1.5
LOST_AFTER = 2.5
FAST = {
    "ASTRAEUS_REPORT_INTERVAL_SECONDS": "0.2",
    "ASTRAEUS_PASS_INTERVAL_SECONDS": "0.2",
    "ASTRAEUS_DOWN_AFTER_SECONDS": str(DOWN_AFTER),
    "ASTRAEUS_LOST_AFTER_SECONDS": str(LOST_AFTER),
}
"""The coordinator's windows, shortened: Down after 1.5 s of silence, Lost after 2.5 s."""

PATIENT = {"ASTRAEUS_DOWN_AFTER_SECONDS": "3600", "ASTRAEUS_LOST_AFTER_SECONDS": "7200"}
"""For tests whose machines are reports sent once by the test, not agents: never Down."""

AGENT_ENV = {
    "ASTRAEUS_BACKOFF_MAX_SECONDS": "0.4",
    "ASTRAEUS_STOP_GRACE_SECONDS": "10",
    # The workers write into this test's private folder, so they run as the test's own user
    # (a uid of their own per task is tested in tests/runtime).
    "ASTRAEUS_WORKER_USER": str(os.getuid()),
    "ASTRAEUS_ALLOW_ROOT_WORKERS": "true",
}

WORKER = """
import json, os, pathlib, signal, sys, time
out, run = pathlib.Path(sys.argv[1]), sys.argv[2]
def stop(*_):
    time.sleep(0.5)  # cleaning up, as a real job does on SIGTERM
    put(".term", str(time.time()))
    sys.exit(143)
def put(suffix, text):
    # Written, then renamed into place: a file the test sees always holds its whole text.
    (out / (run + suffix + ".part")).write_text(text)
    os.replace(out / (run + suffix + ".part"), out / (run + suffix))
signal.signal(signal.SIGTERM, stop)
put(".start", json.dumps({"pid": os.getpid(), "at": time.time()}))
while not (out / (run + ".release")).exists():
    time.sleep(0.05)
"""
"""Writes `<run>.start` (pid, time), exits 0 once `<run>.release` exists; on SIGTERM it takes
half a second, writes `<run>.term` (time) and exits."""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


LISTENING = "astraeus-coordinator: listening on "
"""The line `serve` writes once it listens, with the port it bound."""


class Process:
    """A command started by a test; its output is kept (and written to `<log>`)."""

    def __init__(self, argv: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.log = log
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONFAULTHANDLER": "1", **(env or {})},
            text=True,
        )
        # A pipe, not a file: a test may limit the process's file size (RLIMIT_FSIZE).
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        with self.log.open("a") as out, self.proc.stdout as lines:
            for line in lines:
                self.lines.append(line)
                out.write(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def signal(self, number: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(number)

    def wait(self) -> int:
        try:
            code = self.proc.wait(timeout=DEADLINE_SECONDS)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGABRT)  # PYTHONFAULTHANDLER: every thread's stack
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
            self.proc.kill()
            self.proc.wait()
            self._reader.join(5)
            pytest.fail(f"{self.proc.args[0]} did not exit:\n{self.output}")
        self._reader.join(DEADLINE_SECONDS)
        return code


class Coordinator:
    """`astraeus-coordinator serve` on one file and port, started and stopped at will."""

    def __init__(
        self, root: Path, db: Path | None = None, port: int = 0, database_url: str = ""
    ) -> None:
        self.root = root
        self.db = db or root / "astraeus.db"
        self.database_url = database_url
        """A PostgreSQL database instead of the file `db`, when given."""
        if not port:
            held = hold_port()
            weakref.finalize(self, held.close)
            port = int(held.getsockname()[1])
        self.port = port
        """Every start listens on this port, which agents and proxies know. It is held for as
        long as this object lives (`hold_port`), so between a kill and a restart no other
        program can take it."""
        self.process: Process | None = None
        self.admin = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, env: dict[str, str] | None = None, *, ready: bool = True) -> Process:
        argv = [
            str(BIN / "astraeus-coordinator"), "serve", "--db", str(self.db),
            "--state-dir", str(self.root), "--listen", f"127.0.0.1:{self.port}",
        ]  # fmt: skip
        if self.database_url:
            argv += ["--database-url", self.database_url]
        self.process = Process(argv, self.root / "coordinator.log", {**FAST, **(env or {})})
        if ready:
            self.port = until("the coordinator to listen", self._listening)
            until("the coordinator to answer", self.answers)
            token = self.root / "admin.token"
            self.admin = self.admin or token.read_text().strip()
        return self.process

    def _listening(self) -> int | None:
        """The port the coordinator says it listens on, once it has said it."""
        assert self.process is not None
        if self.process.proc.poll() is not None:
            pytest.fail(f"the coordinator exited:\n{self.process.output}")
        for line in list(self.process.lines):
            if line.startswith(LISTENING):
                return int(line.strip().rpartition(":")[2])
        return None

    def answers(self) -> bool:
        assert self.process is not None
        if self.process.proc.poll() is not None:
            pytest.fail(f"the coordinator exited:\n{self.process.output}")
        try:
            self.health()
        except OSError:
            return False
        return True

    def health(self) -> tuple[int, Any]:
        return self.call("GET", "/healthz", token=None)

    def call(
        self, method: str, path: str, body: Any = None, token: str | None = ""
    ) -> tuple[int, Any]:
        """`token` "" is the admin's; None sends none."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)  # noqa: S310
        if token is not None:
            request.add_header("Authorization", f"Bearer {token or self.admin}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - loopback
                status, text = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read()
        return status, json.loads(text) if text.strip().startswith((b"{", b"[")) else text

    def ok(self, method: str, path: str, body: Any = None, token: str = "") -> Any:
        status, data = self.call(method, path, body, token)
        assert status < 300, (status, data)
        return data

    def kill(self) -> None:
        assert self.process is not None
        self.process.signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> int:
        assert self.process is not None
        self.process.signal(signal.SIGTERM)
        return self.process.wait()


class Cluster:
    """A coordinator, a workspace `faults` with a member token, and agents as processes."""

    def __init__(self, root: Path, database_url: str = "") -> None:
        self.root = root
        self.coordinator = Coordinator(root / "coordinator", database_url=database_url)
        self.coordinator.root.mkdir()
        self.agents: dict[str, Process] = {}
        self.out = root / "out"
        self.out.mkdir()
        self.member = ""

    def start(self, env: dict[str, str] | None = None) -> None:
        """The coordinator (with `env` over `FAST`), the workspace and its member token."""
        c = self.coordinator
        c.start(env)
        c.ok("PUT", "/api/v1/workspaces/faults", {})
        self.member = c.ok("POST", "/api/v1/tokens", {"role": "member", "workspace": "faults"})[
            "token"
        ]

    def agent(self, name: str, url: str | None = None) -> Process:
        """`astraeus-agent run` for a fake 8-GPU H100 machine, reporting to `url`."""
        secret = self.coordinator.ok("POST", "/api/v1/tokens", {"role": "agent", "machine": name})
        token = self.root / f"{name}.token"
        token.write_text(secret["token"])
        argv = [
            str(BIN / "astraeus-agent"), "run", "--coordinator", url or self.coordinator.url,
            "--token-file", str(token), "--name", name, "--backend", "fake:h100-sxm",
            "--state-dir", str(self.root / name),
        ]  # fmt: skip
        self.agents[name] = Process(argv, self.root / f"{name}.log", AGENT_ENV)
        until(f"{name} to report", lambda: self.machine(name)["state"] == "Up")
        return self.agents[name]

    def machine(self, name: str) -> dict[str, Any]:
        status, view = self.coordinator.call("GET", f"/api/v1/machines/{name}")
        return view if status == 200 else {"state": None}

    def submit(self, name: str, gpus: int) -> None:
        spec = {
            "name": name,
            "command": [sys.executable, "-c", WORKER, str(self.out), name],
            "requested_resources": {"gpu_requests": {"count": gpus}},
        }
        self.coordinator.ok("POST", "/api/v1/runs", spec, self.member)

    def run(self, name: str) -> dict[str, Any]:
        return dict(self.coordinator.ok("GET", f"/api/v1/runs/{name}", token=self.member))

    def state(self, name: str, *states: str) -> dict[str, Any] | None:
        run = self.run(name)
        return run if run["state"] in states else None

    def started(self, run: str) -> dict[str, Any]:
        """The worker's pid and start time, once it runs."""
        path = self.out / f"{run}.start"
        found = until(f"the worker of {run} to start", lambda: path.exists() and path.read_text())
        return dict(json.loads(found))

    def release(self, run: str) -> None:
        (self.out / f"{run}.release").touch()

    def stop(self) -> None:
        """SIGTERM to every agent and the coordinator; workers they left are killed."""
        workers = [
            json.loads(p.read_text())["pid"] for p in self.out.glob("*.start") if p.read_text()
        ]
        for agent in self.agents.values():
            agent.signal(signal.SIGTERM)
            agent.wait()
        if self.coordinator.process is not None:
            self.coordinator.process.signal(signal.SIGTERM)
            self.coordinator.process.wait()
        for pid in workers:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def machine_report(name: str) -> dict[str, Any]:
    """What an agent of an 8-GPU machine reports, for tests that report by hand."""
    return {
        "schema_version": SCHEMA_VERSION,
        "name": name,
        "cpu_cores": 64,
        "memory_bytes": 2**40,
        "gpus": [
            {
                "index": i,
                "uuid": gpu_uuid(name, i),
                "vendor": "nvidia",
                "model": "NVIDIA H100 80GB HBM3",
                "memory_bytes": 80 * 2**30,
            }
            for i in range(8)
        ],
    }


def invariants(db: Path) -> dict[str, int]:
    """Check the file as a restart would find it: intact, no GPU held by two tasks (live ones
    and Lost ones still held), `gpu_holds` exactly those GPUs, every run with its tasks.
    Returns the runs by state."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = conn.execute(
            "SELECT machine, gpu_ids FROM tasks"
            " WHERE state IN ('Assigned', 'Starting', 'Running') OR held = 1"
        ).fetchall()
        held = Counter((machine, gpu) for machine, gpus in rows for gpu in json.loads(gpus))
        assert [key for key, n in held.items() if n > 1] == []
        holds = set(conn.execute("SELECT machine, gpu_id FROM gpu_holds").fetchall())
        assert holds == set(held)
        bare = conn.execute(
            "SELECT name FROM runs WHERE seq NOT IN (SELECT run_seq FROM tasks)"
        ).fetchall()
        assert bare == []
        states = conn.execute("SELECT state, count(*) FROM runs GROUP BY state").fetchall()
    finally:
        conn.close()
    return dict(states)
