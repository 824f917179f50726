"""PostgreSQL's own failover, with real processes: a coordinator on a primary and its
synchronous streaming replica (`pg_server.start_pair`), reached through libpq's multi-host URL
(`target_session_attrs=read-write`), two real agents, and a thread submitting runs. The primary
crashes mid-stream (`pg_ctl stop -m immediate`); writes answer 503 with `Retry-After` and
`/healthz` 503 until the replica is promoted (`pg_ctl promote`); then the same coordinator
process, never restarted, writes again on the new primary. Every submission it acknowledged is
there (the replica had each commit before the primary acknowledged it), placement resumes, no
GPU is held twice and no task is Lost."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pg_server
import pytest
from helpers import until

from .rig import WORKER, Cluster

pytestmark = pytest.mark.slow  # two PostgreSQL servers, a coordinator and two agents

ACKNOWLEDGED = (200, 201)


@pytest.fixture
def pair() -> Iterator[pg_server.Pair]:
    """A primary and its synchronous replica; skipped (failed under
    ASTRAEUS_REQUIRE_POSTGRESQL=1) where they cannot start."""
    started = pg_server.start_pair()
    if isinstance(started, str):
        if os.environ.get("ASTRAEUS_REQUIRE_POSTGRESQL") == "1":
            pytest.fail(f"ASTRAEUS_REQUIRE_POSTGRESQL=1 but no PostgreSQL pair: {started}")
        pytest.skip(f"no PostgreSQL primary and replica: {started}")
    yield started
    started.stop()


@dataclass
class Answer:
    name: str
    status: int
    """The HTTP status; 0 where no answer came (the connection failed)."""
    retry_after: str | None
    at: float


@dataclass
class Submitter:
    """Submits 1-GPU runs one after another, as a client would, and keeps every answer."""

    cluster: Cluster
    answers: list[Answer] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self._loop, name="submitter", daemon=True)
        thread.start()
        return thread

    def _loop(self) -> None:
        number = 0
        while not self.done.is_set():
            number += 1
            self.answers.append(self._submit(f"s{number:04d}"))
            self.done.wait(0.05)

    def _submit(self, name: str) -> Answer:
        c = self.cluster
        spec = {
            "name": name,
            "command": [sys.executable, "-c", WORKER, str(c.out), name],
            "requested_resources": {"gpu_requests": {"count": 1}},
        }
        request = urllib.request.Request(  # noqa: S310 - loopback
            c.coordinator.url + "/api/v1/runs",
            data=json.dumps(spec).encode(),
            method="POST",
            headers={"Authorization": f"Bearer {c.member}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
                return Answer(name, response.status, None, time.monotonic())
        except urllib.error.HTTPError as error:
            return Answer(name, error.code, error.headers.get("Retry-After"), time.monotonic())
        except OSError:
            return Answer(name, 0, None, time.monotonic())

    def acknowledged(self) -> list[Answer]:
        return [a for a in list(self.answers) if a.status in ACKNOWLEDGED]

    def since(self, moment: float) -> list[Answer]:
        return [a for a in list(self.answers) if a.at > moment]


def _rows(url: str, sql: str) -> list[tuple[object, ...]]:
    import psycopg

    with psycopg.connect(url, connect_timeout=10) as conn:
        return list(conn.execute(sql.encode()).fetchall())


def _held_twice(url: str) -> tuple[list[tuple[str, str]], bool]:
    """GPUs held by two live tasks, and whether `gpu_holds` is exactly the GPUs held."""
    rows = _rows(
        url,
        "SELECT machine, gpu_ids FROM tasks"
        " WHERE state IN ('Assigned', 'Starting', 'Running') OR held = 1",
    )
    held = Counter((str(m), gpu) for m, gpus in rows for gpu in json.loads(str(gpus)))
    holds = {(str(m), str(g)) for m, g in _rows(url, "SELECT machine, gpu_id FROM gpu_holds")}
    return [key for key, n in held.items() if n > 1], holds == set(held)


def _metric(cluster: Cluster, name: str) -> str | None:
    status, text = cluster.coordinator.call("GET", "/metrics")
    if status != 200:
        return None
    lines = (text.decode() if isinstance(text, bytes) else str(text)).splitlines()
    return next((line.split()[1] for line in lines if line.startswith(name + " ")), None)


def test_the_replica_promoted_takes_over_with_nothing_acknowledged_lost(
    tmp_path: Path, pair: pg_server.Pair
) -> None:
    url = pair.create_database()
    c = Cluster(tmp_path, database_url=url)
    submitter = Submitter(c)
    try:
        c.start()
        c.agent("node-a")
        c.agent("node-b")
        thread = submitter.start()
        until("20 acknowledged submissions", lambda: len(submitter.acknowledged()) >= 20)
        first = submitter.acknowledged()[0].name
        c.started(first)

        crashed = time.monotonic()
        pair.crash_primary()
        before = [a for a in submitter.acknowledged() if a.at <= crashed]
        until(
            "/healthz to answer 503 with no primary",
            lambda: c.coordinator.health()[0] == 503,
        )
        until(
            "20 submissions refused with no primary",
            lambda: len([a for a in submitter.since(crashed) if a.status == 503]) >= 20,
        )

        promoting = time.monotonic()
        pair.promote()
        promoted = time.monotonic()
        resumed = until(
            "a submission accepted on the promoted replica",
            lambda: next((a for a in submitter.since(promoting) if a.status in ACKNOWLEDGED), None),
        )
        until("/healthz to answer 200 again", lambda: c.coordinator.health()[0] == 200)
        until("the database gauge at 1", lambda: _metric(c, "astraeus_database_writable") == "1")
        until(
            "10 submissions accepted after the promotion",
            lambda: len([a for a in submitter.since(promoted) if a.status in ACKNOWLEDGED]) >= 10,
        )
        submitter.done.set()
        thread.join(60)

        answers = list(submitter.answers)
        during = [a for a in answers if crashed < a.at <= resumed.at and a.status not in (200, 201)]
        # Every refusal said when to come back; none was an error of the coordinator's own.
        assert {(a.status, a.retry_after is not None) for a in during} == {(503, True)}

        twice, exact = _held_twice(url)
        assert (twice, exact) == ([], True)

        acknowledged = [a.name for a in answers if a.status in ACKNOWLEDGED]
        stored = {str(row[0]) for row in _rows(url, "SELECT name FROM runs")}
        lost = [name for name in acknowledged if name not in stored]
        print(
            f"\nPostgreSQL failover: {len(before)} submissions acknowledged before the crash,"
            f" {len(during)} refused (503 + Retry-After) meanwhile,"
            f" {resumed.at - promoting:.2f} s from `pg_ctl promote` to the first accepted write"
            f" (the promotion itself: {promoted - promoting:.2f} s),"
            f" {len(acknowledged)} acknowledged in all, {len(lost)} lost"
        )
        assert lost == []

        # Placement resumed: as GPUs free up, every run waiting (those submitted after the
        # promotion among them) is placed on the new primary, starts and succeeds.
        for answer in answers:
            c.release(answer.name)  # a worker that starts from now on ends at once
        for name in acknowledged:
            until(f"{name} to succeed", lambda name=name: c.state(name, "Succeeded"))
        c.started(resumed.name)

        lost_tasks = _rows(url, "SELECT name FROM runs WHERE state = 'Lost'") + _rows(
            url, "SELECT id FROM tasks WHERE state = 'Lost'"
        )
        twice, exact = _held_twice(url)
        process = c.coordinator.process
        assert process is not None
        assert lost_tasks == []
        assert (twice, exact) == ([], True)
        assert process.proc.poll() is None  # the same process throughout: no restart
    finally:
        submitter.done.set()
        c.stop()
