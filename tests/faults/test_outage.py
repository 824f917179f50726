"""A coordinator outage longer than the Lost grace, with a real agent running real workers."""

from __future__ import annotations

import time

import pytest
from helpers import Proxy, until

from .rig import LOST_AFTER, Cluster, alive, invariants

pytestmark = pytest.mark.slow  # real processes through an outage past the Lost grace


def test_an_outage_costs_no_running_job(cluster: Cluster) -> None:
    """The coordinator is SIGKILLed for longer than `lost_after_seconds` while a worker runs
    and another ends: after the restart the agent reconnects, its queued update is applied,
    the running worker still runs as the same process, its task stays Running and its run
    later Succeeds, and the run waiting for its GPUs gets them only after it ended."""
    c = cluster.coordinator
    proxy = Proxy(c.port)  # the agent's way in, so the test decides when it gets back
    try:
        _outage(cluster, proxy)
    finally:
        proxy.close()
    cluster.stop()
    assert invariants(c.db) == {"Succeeded": 3}


def _passes(cluster: Cluster) -> int:
    """Scheduler passes the running coordinator has made."""
    metrics = cluster.coordinator.ok("GET", "/metrics").decode()
    return int(metrics.split("\nastraeus_scheduler_pass_seconds_count ")[1].split()[0])


def _task(cluster: Cluster, run: str) -> str:
    return str(cluster.run(run)["tasks"][0]["state"])


def _outage(cluster: Cluster, proxy: Proxy) -> None:
    c = cluster.coordinator
    cluster.agent("node-a", proxy.url)
    cluster.submit("steady", 4)
    cluster.submit("brief", 4)
    cluster.submit("big", 8)  # waits for both
    steady = cluster.started("steady")
    cluster.started("brief")
    until(
        "both tasks Running",
        lambda: _task(cluster, "steady") == _task(cluster, "brief") == "Running",
    )
    assert cluster.run("big")["state"] == "Pending"

    c.kill()
    proxy.cut()
    cluster.release("brief")  # it ends while nobody listens: its update waits in the outbox
    time.sleep(LOST_AFTER + 0.5)  # the outage: past the Lost grace
    assert alive(steady["pid"])
    # Passes in a thread: the first one after the restart comes at once (no worker process
    # to spawn), and the agent is let in only after it, well inside the Lost window.
    c.start({"ASTRAEUS_PASS_PROCESS": "false"})
    # That pass judged a machine last seen before the outage: the outage is not its silence.
    until("a pass after the restart", lambda: _passes(cluster) >= 1)
    assert _task(cluster, "steady") == "Running"
    proxy.heal()

    done = until("brief's queued end to arrive", lambda: cluster.state("brief", "Succeeded"))
    assert done["tasks"][0]["state"] == "Succeeded"
    running = cluster.run("steady")
    assert (running["state"], running["tasks"][0]["state"]) == ("Running", "Running")
    assert running["tasks"][0]["message"] is None
    assert alive(steady["pid"])
    assert cluster.run("big")["state"] == "Pending"  # steady still holds 4 of the 8 GPUs

    released = time.time()
    cluster.release("steady")
    ended = until("steady to end", lambda: cluster.state("steady", "Succeeded", "Failed"))
    assert ended["state"] == "Succeeded"
    big = cluster.started("big")
    assert big["at"] > released  # its GPUs went to big only after steady's worker ended
    cluster.release("big")
    until("big to end", lambda: cluster.state("big", "Succeeded"))
