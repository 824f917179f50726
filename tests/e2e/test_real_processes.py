"""The installed commands, as separate processes: a coordinator, two agents and the `astra` CLI."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import until

BIN = Path(sys.executable).parent
DEADLINE_SECONDS = 60.0
"""Generous: only a hang reaches it. Nothing here asserts how fast anything is."""

WORKER = (
    "import json,os,sys,time,pathlib; d=pathlib.Path(sys.argv[1]); "
    "env={**os.environ,'PID':str(os.getpid())}; "
    "(d/('env-'+env['RANK']+'.json')).write_text(json.dumps(env)); t=time.monotonic(); "
    "[time.sleep(0.1) for _ in iter(lambda: (d/'release').exists() or time.monotonic()-t>120, 1)]"
)
"""Writes its environment (and pid) to env-<RANK>.json, then sleeps until the file `release`
appears (at most 120 s: `iter(f, True)` calls f until it answers True) and exits 0."""


FAST = {"ASTRAEUS_REPORT_INTERVAL_SECONDS": "0.5", "ASTRAEUS_PASS_INTERVAL_SECONDS": "0.5"}
"""Agents report, and passes run, twice a second, so the test spends little time waiting."""
AS_THIS_USER = {"ASTRAEUS_WORKER_USER": "root", "ASTRAEUS_ALLOW_ROOT_WORKERS": "true"}
"""The workers run this test's Python and write into its private folder, so they run as the
test's own user: root where the test is root (a uid of their own is tested in tests/runtime)."""


LISTENING = "astraeus-coordinator: listening on "


def _listening(log: Path) -> str | None:
    """The address the coordinator says it listens on (it chose the port), once it has."""
    for line in log.read_text(errors="replace").splitlines() if log.exists() else ():
        if line.startswith(LISTENING):
            return line.removeprefix(LISTENING).strip()
    return None


def _children() -> dict[int, list[int]]:
    """Every process's children, from /proc."""
    found: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        found.setdefault(ppid, []).append(int(entry.name))
    return found


def _descendants(pid: int) -> set[int]:
    children = _children()
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


class Cluster:
    """The processes this test starts, so that every one is stopped however the test ends."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.url = ""
        """The coordinator's address, as it announced it."""
        self.procs: list[subprocess.Popen[bytes]] = []
        self.seen: set[int] = set()

    def start(
        self, name: str, *argv: str, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        log = (self.root / f"{name}.log").open("wb")
        proc = subprocess.Popen(
            [str(BIN / argv[0]), *argv[1:]],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )
        self.procs.append(proc)
        return proc

    def start_coordinator(self, state: Path, *extra: str, env: dict[str, str]) -> None:
        """`astraeus-coordinator serve` on a port it picks; `url` is the address it announces."""
        self.start(
            "coordinator",
            "astraeus-coordinator", "serve", "--listen", "127.0.0.1:0",
            "--state-dir", str(state), "--db", str(state / "astraeus.db"), *extra, env=env,
        )  # fmt: skip
        log = self.root / "coordinator.log"
        self.url = until("the coordinator to say where it listens", lambda: _listening(log))

    def admin_token(self, state: Path) -> str:
        """The admin token the coordinator wrote into `state`, once the coordinator answers."""
        path = state / "admin.token"
        admin = until("the admin token file", lambda: path.exists() and path.read_text())
        until("the coordinator to answer", lambda: _answers(self.url))
        return str(admin).strip()

    def member_of_e2e(self, admin: str) -> str:
        """Workspace `e2e` made with the CLI, and a member token for it."""
        self.astra("astraeus", "workspace", "set", "e2e", token=admin)
        argv = ("astraeus", "token", "create", "--role", "member", "--for-workspace", "e2e")
        return self.astra(*argv, token=admin).strip()

    def api(self, path: str, token: str, body: Any = None, method: str | None = None) -> Any:
        """Call an API route (the CLI starts a process per call, too slow to poll or set up
        with); None for an HTTP error."""
        request = urllib.request.Request(  # noqa: S310 - our own http://127.0.0.1 URL
            f"{self.url}/api/v1{path}",
            data=None if body is None else json.dumps(body).encode(),
            method=method or ("GET" if body is None else "POST"),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
                return json.loads(response.read())
        except urllib.error.HTTPError:
            return None

    def start_agent(self, name: str, admin: str, backend: str, *flags: str) -> None:
        """`astraeus-agent run` for machine `name` with an agent token made for it, its state
        under this cluster's folder."""
        secret = self.api("/tokens", admin, {"role": "agent", "machine": name})["token"]
        token_file = self.root / f"{name}.token"
        token_file.write_text(secret)
        self.start(
            name,
            "astraeus-agent", "run", "--coordinator", self.url, "--token-file", str(token_file),
            "--name", name, "--backend", backend, "--state-dir", str(self.root / name),
            *flags, env=AS_THIS_USER,
        )  # fmt: skip

    @property
    def port(self) -> int:
        return int(self.url.rpartition(":")[2])

    def astra(self, *argv: str, token: str) -> str:
        env = {**os.environ, "ASTRA_API": self.url, "ASTRA_TOKEN": token}
        env["ASTRA_CONFIG"] = str(self.root / "no-config.toml")
        done = subprocess.run(
            [str(BIN / "astra"), *argv], env=env, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def remember_descendants(self) -> None:
        for proc in self.procs:
            self.seen |= _descendants(proc.pid)

    def stop(self) -> None:
        self.remember_descendants()
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=DEADLINE_SECONDS)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """The processes started in this test, each sent SIGTERM (and reaped) at the end."""
    started = Cluster(tmp_path)
    yield started
    started.stop()


def _run(cluster: Cluster, token: str) -> dict[str, Any]:
    return dict(
        json.loads(cluster.astra("astraeus", "status", "spread", "-o", "json", token=token))
    )


@pytest.mark.slow
def test_a_16_gpu_run_spreads_over_two_agent_processes(cluster: Cluster, tmp_path: Path) -> None:
    """A coordinator and two fake-H100 agents as processes run a 16-GPU run as 2 × 8: each
    worker sees its 8 GPU UUIDs, WORLD_SIZE=2, its own RANK and NCCL_IB_HCA as `=port,...`; the
    run succeeds, and after SIGTERM no process of the test is left."""
    state = tmp_path / "coordinator"
    cluster.start_coordinator(state, "--cluster-name", "gpu-e2e", env=FAST)
    admin = cluster.admin_token(state)
    member = cluster.member_of_e2e(admin)
    for name in ("node-a", "node-b"):
        secret = cluster.astra(
            "astraeus", "token", "create", "--role", "agent", "--machine", name, token=admin
        )
        token_file = tmp_path / f"{name}.token"
        token_file.write_text(secret)
        cluster.start(
            name,
            "astraeus-agent", "run", "--coordinator", cluster.url, "--token-file", str(token_file),
            "--name", name, "--backend", "fake:h100-sxm", "--state-dir", str(tmp_path / name),
            env=AS_THIS_USER,
        )  # fmt: skip
    until("both agents to report their GPUs", lambda: _gpus_up(cluster, member) == 16)

    out_dir = tmp_path / "out"
    out_dir.mkdir()
    command = [sys.executable, "-c", WORKER, str(out_dir)]
    submitted = cluster.astra(
        "astraeus", "run", "--name", "spread", "--gpus", "16", "--", *command, token=member
    )
    # The link names the cluster (not the workspace, `e2e`), as the guide's does.
    assert submitted.startswith("spread submitted to gpu-e2e: ")
    assert submitted.rstrip().endswith("/console/jobs/gpu-e2e/spread")

    running = until("the run to be Running", lambda: _state(cluster, member, "Running"))
    assert (running["shape"]["tasks"], running["shape"]["gpus_each"]) == (2, 8)
    status = cluster.astra("astraeus", "status", "spread", token=member)
    assert status.startswith("spread: Running — 2 machines × 8 GPUs")
    envs = until("both workers' environments", lambda: _envs(out_dir))
    cluster.remember_descendants()  # the workers, while they live

    assert sorted(env["RANK"] for env in envs) == ["0", "1"]
    for env in envs:
        task = next(t for t in running["tasks"] if t["name"] == f"spread-{env['RANK']}")
        devices = env["CUDA_VISIBLE_DEVICES"].split(",")
        assert devices == task["assigned_gpu_ids"]
        assert len(devices) == 8
        assert all(re.fullmatch(r"GPU-[0-9a-f-]{36}", d) for d in devices)
        assert env["WORLD_SIZE"] == "2"
        assert env["NCCL_IB_HCA"] == _hca(cluster, member, task["machine"])
    assert {t["machine"] for t in running["tasks"]} == {"node-a", "node-b"}

    (out_dir / "release").touch()
    done = until("the run to end", lambda: _state(cluster, member, "Succeeded", "Failed"))
    assert done["state"] == "Succeeded"

    cluster.stop()
    assert [proc.returncode for proc in cluster.procs] == [0, 0, 0]
    workers = {int(env["PID"]) for env in envs}
    left = sorted(pid for pid in cluster.seen | workers if _alive(pid))
    assert left == [], f"processes left running: {left}"


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=5) as response:  # noqa: S310
            return bool(response.status == 200)
    except OSError:
        return False


def _gpus_up(cluster: Cluster, token: str) -> int:
    listed = json.loads(cluster.astra("astraeus", "machines", "-o", "json", token=token))
    return sum(m["gpus_free"] for m in listed["machines"] if m["state"] == "Up")


def _state(cluster: Cluster, token: str, *states: str) -> dict[str, Any] | None:
    run = _run(cluster, token)
    return run if run["state"] in states else None


def _envs(out_dir: Path) -> list[dict[str, str]] | None:
    files = sorted(out_dir.glob("env-*.json"))
    if len(files) < 2:
        return None
    try:
        return [json.loads(f.read_text()) for f in files]
    except json.JSONDecodeError:
        return None  # caught mid-write


def _hca(cluster: Cluster, token: str, machine: str) -> str:
    """`=mlx5_0:1,...`: the machine's up InfiniBand ports, exact-match form, in report order."""
    detail = json.loads(cluster.astra("astraeus", "machine", machine, "-o", "json", token=token))
    ports = [p for p in detail["report"]["rdma_ports"] if p["state"] == "ACTIVE"]
    assert len(ports) == 8
    return "=" + ",".join(f"{p['device']}:{p['port']}" for p in ports)
