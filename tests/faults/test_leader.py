"""Two coordinators on one PostgreSQL database, as real processes (issue 27.2): one leads, the
other stands by and names it; the leader killed with SIGKILL three times under load, a standby
taking over each time with nothing acknowledged lost, no GPU held twice and no task Lost; a
leader paused past its lease, then resumed, refused by the fence and stepping down (exit 75);
a standby that opens nothing of the store until it leads.

The agents are given both coordinators' addresses and follow the leader themselves; the load
reaches the coordinators through `Front`, a TCP proxy that sends new connections to whichever
coordinator's `/healthz` answers 200 (an operator's load balancer with a health check).
`test_follow_leader.py` has `astra` follow the leader too."""

from __future__ import annotations

import json
import signal
import socket
import statistics
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers import Proxy, until

from astraeus.coordinator.store.leader import Leadership

from .rig import AGENT_ENV, BIN, LISTENING, Coordinator, Process, alive

pytestmark = pytest.mark.slow  # two coordinators, agents, three takeovers

AGENTS = 8
"""Real agents, each a fake 8-GPU machine (64 GPUs), as the issue asks."""

KILLS = 3
TAKEOVER_LIMIT_SECONDS = 10.0
"""The issue's bound on a takeover after the leader's death (kill -9)."""

ENV = {
    "ASTRAEUS_REPORT_INTERVAL_SECONDS": "0.5",
    "ASTRAEUS_PASS_INTERVAL_SECONDS": "0.5",
    "ASTRAEUS_DOWN_AFTER_SECONDS": "10",
    "ASTRAEUS_LOST_AFTER_SECONDS": "30",
}
"""Reports every half second; Down after 10 s of silence and Lost after 30 s: a takeover that
did not count every machine as heard (or took longer than the issue allows) shows."""


def _get(url: str, token: str | None = None) -> tuple[int, Any, dict[str, str]]:
    """(status, JSON body or text, headers) of a GET that follows no redirect."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *_args: Any, **_kwargs: Any) -> None:
            return None

    request = urllib.request.Request(url)  # noqa: S310 - loopback
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request, timeout=10) as response:
            status, text, headers = response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as error:
        status, text, headers = error.code, error.read(), dict(error.headers)
    body = json.loads(text) if text.strip().startswith(b"{") else text.decode()
    return status, body, headers


def _post(url: str, body: Any, token: str) -> int:
    """The status of a POST; 0 when no answer came (refused, reset, or 3 s without one: a
    request in flight through `Front` when the leader is killed may wait that long, as the
    test proxy does not wake a connection whose other side died)."""
    request = urllib.request.Request(  # noqa: S310 - loopback
        url, data=json.dumps(body).encode(), method="POST"
    )
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=3) as response:  # noqa: S310
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError:
        return 0


def _health(c: Coordinator) -> int | None:
    try:
        return _get(c.url + "/healthz")[0]
    except OSError:
        return None


def _standby(c: Coordinator, admin: str, env: dict[str, str] = ENV) -> Coordinator:
    """Start `c` and wait until it listens and answers (as a standby, or as the leader)."""
    c.start(env, ready=False)
    until("the coordinator to listen", lambda: any(LISTENING in line for line in _lines(c)))
    until("the coordinator to answer", lambda: _health(c) is not None)
    c.admin = admin
    return c


def _lines(c: Coordinator) -> list[str]:
    assert c.process is not None
    if c.process.proc.poll() is not None:
        pytest.fail(f"the coordinator exited:\n{c.process.output}")
    return list(c.process.lines)


class Front:
    """New connections go to whichever coordinator's `/healthz` answers 200 (checked every
    0.1 s), as an operator's load balancer would send them."""

    def __init__(self, coordinators: list[Coordinator]) -> None:
        self.coordinators = coordinators
        self.proxy = Proxy(coordinators[0].port)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._check, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return self.proxy.url

    def _check(self) -> None:
        while not self._stop.wait(0.1):
            for c in self.coordinators:
                if c.process is not None and c.process.proc.poll() is None and _health(c) == 200:
                    self.proxy.target = c.port
                    break

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.proxy.cut()


PER_KILL = 150
"""Submissions acknowledged before each kill (a third of them cancelled too)."""

LOAD_THREADS = 4
"""Threads submitting and cancelling at once, so that several requests are in flight at
each kill."""


@dataclass
class Load:
    """Submissions and cancels from threads through `Front`, each retried until answered:
    every third run ends at once, every third is cancelled, the rest run for two seconds."""

    url: str
    token: str
    acknowledged: list[str] = field(default_factory=list)
    cancels: list[str] = field(default_factory=list)
    refused: Counter[int] = field(default_factory=Counter)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self, prefix: str) -> None:
        number = 0
        while not self.stop.is_set():
            name = f"{prefix}-{number}"
            seconds = "0" if number % 3 == 0 else "2"
            spec = {
                "name": name,
                "command": ["/bin/sleep", seconds],
                "requested_resources": {"gpu_requests": {"count": 1 + number % 2}},
            }
            status = _post(self.url + "/api/v1/runs", spec, self.token)
            if status == 409:  # sent before, committed, but the answer was lost in a kill
                number += 1
                continue
            if status >= 300 or status == 0:
                self.refused[status] += 1
                self.stop.wait(0.1)
                continue
            self.acknowledged.append(name)
            number += 1
            if number % 3 == 2:
                self._cancel(name)

    def _cancel(self, name: str) -> None:
        while not self.stop.is_set():
            status = _post(self.url + f"/api/v1/runs/{name}/cancel", {}, self.token)
            if 200 <= status < 300:
                self.cancels.append(name)
                return
            if status in (404, 409):  # already ended
                return
            self.refused[status] += 1
            self.stop.wait(0.1)


@pytest.fixture
def pair(tmp_path: Path, postgresql_url: str) -> Iterator[list[Coordinator]]:
    """Two coordinators on one database; the first leads (it starts first)."""
    yield from _pair(tmp_path, postgresql_url, ENV)


@pytest.fixture
def short_pair(tmp_path: Path, postgresql_url: str) -> Iterator[list[Coordinator]]:
    """`pair` with a 3 s lease (the default is 6), for a test that waits one out."""
    yield from _pair(tmp_path, postgresql_url, {**ENV, "ASTRAEUS_LEADER_LEASE_SECONDS": "3"})


def _pair(root: Path, url: str, env: dict[str, str]) -> Iterator[list[Coordinator]]:
    made = []
    for name in ("a", "b"):
        (root / name).mkdir()
        made.append(Coordinator(root / name, database_url=url))
    made[0].start(env)
    _standby(made[1], made[0].admin, env)
    yield made
    for c in made:
        if c.process is not None and c.process.proc.poll() is None:
            c.process.signal(signal.SIGCONT)
            c.process.signal(signal.SIGTERM)
            c.process.wait()


def _held(url: str) -> tuple[Counter[tuple[str, str]], set[tuple[str, str]]]:
    """GPUs held by live tasks (each should count once), and the `gpu_holds` rows, read in
    one snapshot (the leader goes on placing and ending tasks meanwhile)."""
    with psycopg.connect(url) as conn:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        rows = conn.execute(
            "SELECT machine, gpu_ids FROM tasks"
            " WHERE state IN ('Assigned', 'Starting', 'Running') OR held = 1"
        ).fetchall()
        holds = {(m, g) for m, g in conn.execute("SELECT machine, gpu_id FROM gpu_holds")}
    return Counter((m, gpu) for m, gpus in rows for gpu in json.loads(gpus)), holds


def _query(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return list(conn.execute(sql.encode()).fetchall())


def _stop(agents: list[Process]) -> None:
    for agent in agents:
        agent.signal(signal.SIGTERM)
    for agent in agents:
        agent.wait()


def _agents(root: Path, coordinators: str, leader: Coordinator, started: list[Process]) -> None:
    """`AGENTS` agents given `coordinators` (every coordinator's address: they follow the leader
    themselves), added to `started` as each starts."""
    for i in range(AGENTS):
        name = f"node-{i}"
        secret = leader.ok("POST", "/api/v1/tokens", {"role": "agent", "machine": name})
        token = root / f"{name}.token"
        token.write_text(secret["token"])
        argv = [
            str(BIN / "astraeus-agent"), "run", "--coordinator", coordinators,
            "--token-file", str(token), "--name", name, "--backend", "fake:h100-sxm",
            "--state-dir", str(root / name),
        ]  # fmt: skip
        started.append(Process(argv, root / f"{name}.log", AGENT_ENV))
    until("every agent to report", lambda: _up(leader) == AGENTS)


def _up(c: Coordinator) -> int:
    """Machines Up, as the coordinator `c` (the leader) shows them."""
    return sum(m["state"] == "Up" for m in c.ok("GET", "/api/v1/machines")["machines"])


def _leading(pair: list[Coordinator]) -> Coordinator:
    return until(
        "one coordinator to lead", lambda: next((c for c in pair if _health(c) == 200), None)
    )


@pytest.fixture
def agents() -> Iterator[list[Process]]:
    """Agent processes a test starts; all stopped at its end, however it ends."""
    started: list[Process] = []
    yield started
    _stop(started)


def test_kill_9_of_the_leader_three_times_under_load(
    tmp_path: Path, pair: list[Coordinator], postgresql_url: str, agents: list[Process]
) -> None:
    """Under submissions and cancels from four threads, with 8 agents running the runs, the
    leader is killed with SIGKILL three times and restarted (a standby then): each takeover
    within the issue's 10 s, no GPU held twice right after each, and at the end every
    acknowledged submission there, no task Lost, every acknowledged cancel carried out."""
    leader = pair[0]
    leader.ok("PUT", "/api/v1/workspaces/faults", {})
    member = leader.ok("POST", "/api/v1/tokens", {"role": "member", "workspace": "faults"})
    front = Front(pair)
    load = Load(front.url, member["token"])
    threads = [
        threading.Thread(target=load.run, args=(f"t{i}",), daemon=True) for i in range(LOAD_THREADS)
    ]
    takeovers: list[float] = []
    try:
        _agents(tmp_path, ",".join(c.url for c in pair), leader, agents)
        for thread in threads:
            thread.start()
        for _ in range(KILLS):
            before = len(load.acknowledged)
            until("runs submitted", lambda b=before: len(load.acknowledged) >= b + PER_KILL)  # type: ignore[misc]
            leader = _leading(pair)
            standby = pair[1] if leader is pair[0] else pair[0]
            killed_at = time.monotonic()
            leader.kill()
            until("the standby to lead", lambda s=standby: _health(s) == 200)  # type: ignore[misc]
            takeovers.append(time.monotonic() - killed_at)
            _standby(leader, standby.admin)  # back, as a standby naming the new leader
            status, body, _ = _get(leader.url + "/healthz")
            assert (status, body["status"], body["leader"]) == (503, "standby", standby.url)
            until("every machine Up at the new leader", lambda s=standby: _up(s) == AGENTS)  # type: ignore[misc]
            held, holds = _held(postgresql_url)
            assert [gpu for gpu, n in held.items() if n > 1] == []
            assert holds == set(held)
    finally:
        load.stop.set()
        for thread in threads:
            if thread.is_alive():
                thread.join(30)
        front.close()
    leader = _leading(pair)
    names = {name for (name,) in _query(postgresql_url, "SELECT name FROM runs")}
    lost = [name for name in load.acknowledged if name not in names]
    held, holds = _held(postgresql_url)
    twice = [gpu for gpu, n in held.items() if n > 1]
    tasks_lost = _query(postgresql_url, "SELECT count(*) FROM tasks WHERE state = 'Lost'")[0][0]
    epochs = _query(postgresql_url, "SELECT epoch FROM leadership")[0][0]
    print(
        f"\nleader kill -9 x{KILLS}, {AGENTS} agents: takeover median"
        f" {statistics.median(takeovers):.2f} s, slowest {max(takeovers):.2f} s"
        f" ({', '.join(f'{t:.2f}' for t in takeovers)}); submissions acknowledged"
        f" {len(load.acknowledged)}, lost {len(lost)}; cancels acknowledged {len(load.cancels)};"
        f" refused or unanswered while switching {sum(load.refused.values())}"
        f" {dict(load.refused)}; GPUs held twice {len(twice)}; tasks Lost {tasks_lost};"
        f" epoch now {epochs}",
        file=sys.stderr,
    )
    assert lost == []
    assert twice == []
    assert holds == set(held)
    assert tasks_lost == 0
    assert epochs == 1 + KILLS
    assert max(takeovers) <= TAKEOVER_LIMIT_SECONDS, takeovers
    cancelled = set(load.cancels)
    until(
        "every acknowledged cancel to end its run",
        lambda: (
            not [
                name
                for name, state in _query(postgresql_url, "SELECT name, state FROM runs")
                if name in cancelled and state not in ("Cancelled", "Succeeded", "Failed")
            ]
        ),
    )
    assert leader.process is not None
    assert alive(leader.process.proc.pid)


def test_a_paused_leader_is_fenced_and_steps_down(
    short_pair: list[Coordinator], postgresql_url: str
) -> None:
    """SIGSTOP the leader past its lease; the standby takes over; SIGCONT: the old leader's
    pending submission is refused by the fence (it is not in the database) and it exits 75
    with one line naming the new leader. Before that, the standby's answers name the leader."""
    a, b = short_pair
    assert a.process is not None
    assert b.process is not None
    status, body, headers = _get(b.url + "/api/v1/runs", a.admin)
    assert status == 503
    assert headers["Astraeus-Leader"] == a.url
    assert headers["Retry-After"] == "1"
    assert body == {
        "error": f"this coordinator is a standby; the leader is {a.url}",
        "fields": [],
        "leader": a.url,
    }
    status, _, headers = _get(b.url + "/console/?x=1")
    assert (status, headers["Location"]) == (307, f"{a.url}/console/?x=1")
    assert "astraeus_coordinator_leader 0" in _get(b.url + "/metrics")[1]
    metrics = _get(a.url + "/metrics", a.admin)[1]
    assert "\nastraeus_coordinator_leader 1\n" in metrics
    assert "\nastraeus_coordinator_epoch 1\n" in metrics

    a.ok("PUT", "/api/v1/workspaces/faults", {})
    a.process.signal(signal.SIGSTOP)
    answers: list[int] = []
    pending = threading.Thread(
        target=lambda: answers.append(_put(a.url + "/api/v1/workspaces/paused", a.admin)),
        daemon=True,
    )
    pending.start()  # reaches the paused leader's socket; answered, if ever, after SIGCONT
    until("the standby to lead", lambda: _health(b) == 200)
    assert _get(b.url + "/metrics", a.admin)[1].count("\nastraeus_coordinator_epoch 2\n") == 1
    a.process.signal(signal.SIGCONT)
    assert a.process.wait() == 75
    pending.join(30)
    expected = f"deposed: {socket.gethostname()} pid {b.process.proc.pid} leads at epoch 2;"
    assert f"{expected} stepping down\n" in a.process.output, a.process.output
    assert not [status for status in answers if 200 <= status < 300]
    workspaces = {name for (name,) in _query(postgresql_url, "SELECT name FROM workspaces")}
    assert "faults" in workspaces
    assert "paused" not in workspaces

    a.start({**ENV, "ASTRAEUS_LEADER_LEASE_SECONDS": "3"}, ready=False)  # restarted: a standby
    until("the old leader to stand by", lambda: _standby_of(a) == b.url)


def _put(url: str, token: str) -> int:
    request = urllib.request.Request(url, data=b"{}", method="PUT")  # noqa: S310 - loopback
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError:
        return 0


def _standby_of(c: Coordinator) -> str | None:
    try:
        status, body, _ = _get(c.url + "/healthz")
    except OSError:
        return None
    return body.get("leader") if status == 503 and isinstance(body, dict) else None


def test_a_standby_never_opens_the_store_and_leads_once_the_leader_is_gone(
    tmp_path: Path, postgresql_url: str
) -> None:
    """Another process leads (a lease taken by the test) over an empty database: the
    coordinator stands by, naming it, and makes no table but the lease's (no migrations, no
    admin token); once that leader's session ends it takes over at once and starts as a
    first start would (migrations, the first admin token), answering 200."""
    leader = Leadership(
        postgresql_url, advertise="http://elsewhere:8470", lease_seconds=60.0, holder="test-leader"
    )
    try:
        assert leader.take() == 1
        c = Coordinator(tmp_path, database_url=postgresql_url)
        c.start(ENV, ready=False)
        until("the standby to name the leader", lambda: _standby_of(c) == "http://elsewhere:8470")
        tables = {t for (t,) in _query(postgresql_url, _TABLES)}
        assert tables == {"leadership"}
        assert not (tmp_path / "admin.token").exists()
        assert "standby: test-leader leads (epoch 1) at http://elsewhere:8470" in "".join(_lines(c))
    finally:
        leader.close()
    until("the standby to lead", lambda: _health(c) == 200)
    assert (tmp_path / "admin.token").exists()
    assert {"runs", "tasks", "gpu_holds", "schema_version"} <= {
        t for (t,) in _query(postgresql_url, _TABLES)
    }
    assert _query(postgresql_url, "SELECT epoch FROM leadership") == [(2,)]
    assert c.stop() == 0


_TABLES = "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
