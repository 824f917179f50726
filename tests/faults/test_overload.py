"""Overload on a real coordinator process: a storm of reports is shed, not queued (issue 25.5).

With `max_report_delay_seconds` set very low, the coordinator refuses reports at once (503 with
`Retry-After`) as soon as its event loop runs behind; every report is answered, none waits
until the client gives up, and no machine is shown Down for it: a shed report counts as heard,
for the machines the storm reports for and for a real agent running a job beside them."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from .rig import Cluster, machine_report, until

pytestmark = pytest.mark.slow  # real agent and coordinator processes, several report windows

MACHINES = 40
WINDOWS = {"ASTRAEUS_DOWN_AFTER_SECONDS": "3", "ASTRAEUS_LOST_AFTER_SECONDS": "5"}
"""Down after 3 s: `Retry-After` is whole seconds (1 here), and an agent waits up to half
again, so the rig's 1.5 s window would be too short for an agent honouring it."""
STORM_SECONDS = 4.5
"""Longer than the Down window: a machine whose reports were all refused would be Down."""


def _storm(
    url: str, name: str, token: str, body: bytes, stop: threading.Event, out: list[tuple[int, str]]
) -> None:
    """One machine's reports back to back, one at a time (as an agent sends them): each
    answer's status and Retry-After; a report that is not answered in 30 s fails the test."""
    while not stop.is_set():
        request = urllib.request.Request(  # noqa: S310 - loopback
            f"{url}/api/v1/machines/{name}/report", data=body, method="PUT"
        )
        request.add_header("Authorization", f"Bearer {token}")
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
                response.read()
                out.append((response.status, response.headers.get("Retry-After", "")))
        except urllib.error.HTTPError as error:
            error.read()
            out.append((error.code, error.headers.get("Retry-After", "")))
        except OSError as error:  # a timeout, a reset: what shedding must prevent
            out.append((0, f"{type(error).__name__}: {error}"))


def test_a_storm_of_reports_is_shed_and_no_machine_goes_down(tmp_path: Path) -> None:
    """40 machines report back to back for 4.5 s (longer than the Down window) beside a real
    agent running a job: some reports are refused 503 with Retry-After, every one is answered,
    and every machine stays Up all along; the job keeps running and ends as it should."""
    cluster = Cluster(tmp_path)
    c = cluster.coordinator
    c.start({"ASTRAEUS_MAX_REPORT_DELAY_SECONDS": "0.001", **WINDOWS})
    try:
        c.ok("PUT", "/api/v1/workspaces/faults", {})
        cluster.member = c.ok("POST", "/api/v1/tokens", {"role": "member", "workspace": "faults"})[
            "token"
        ]
        cluster.agent("real")
        cluster.submit("job", 8)
        cluster.started("job")
        tokens, bodies = {}, {}
        for i in range(MACHINES):
            name = f"m{i:02}"
            tokens[name] = c.ok("POST", "/api/v1/tokens", {"role": "agent", "machine": name})[
                "token"
            ]
            bodies[name] = json.dumps({"report": machine_report(name)}).encode()
            first = {"report": machine_report(name)}
            path = f"/api/v1/machines/{name}/report"
            # Even this may be shed (the limit is 1 ms): sent again, as an agent would.
            until(
                f"{name} to report",
                lambda p=path, b=first, t=tokens[name]: c.call("PUT", p, b, t)[0] == 200,
            )
        stop = threading.Event()
        answers: dict[str, list[tuple[int, str]]] = {name: [] for name in tokens}
        threads = [
            threading.Thread(
                target=_storm, args=(c.url, name, tokens[name], bodies[name], stop, answers[name])
            )
            for name in tokens
        ]
        for thread in threads:
            thread.start()
        states: Counter[str] = Counter()
        end = time.monotonic() + STORM_SECONDS
        while time.monotonic() < end:
            states[cluster.machine("real")["state"]] += 1
            time.sleep(0.1)
        _, listed = c.call("GET", "/api/v1/machines")
        stop.set()
        for thread in threads:
            thread.join(60)
        every = [answer for found in answers.values() for answer in found]
        statuses = Counter(status for status, _ in every)
        assert [a for a in every if a[0] not in (200, 503)] == []  # no timeout, no reset
        assert statuses[503] > 0, statuses
        assert {after for status, after in every if status == 503} == {"1"}
        down = [m["name"] for m in listed["machines"] if m["state"] != "Up"]
        assert down == [], statuses
        assert set(states) == {"Up"}, states
        assert cluster.run("job")["state"] == "Running"
        cluster.release("job")
        until("the job to succeed", lambda: cluster.state("job", "Succeeded"))
        metrics = c.ok("GET", "/metrics").decode()
        assert 'astraeus_reports_shed_total{queue="event_loop"} ' in metrics
        assert 'astraeus_reports_shed_total{queue="event_loop"} 0\n' not in metrics
    finally:
        cluster.stop()
