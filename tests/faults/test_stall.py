"""A stalled agent (SIGSTOP) longer than the machine's Down window but within the Lost grace:
silence is not death (issue 25.3)."""

from __future__ import annotations

import signal
import time
from datetime import datetime
from pathlib import Path

import pytest

from .rig import DOWN_AFTER, Cluster, alive, invariants, until

pytestmark = pytest.mark.slow  # real agent and coordinator processes, several report windows

LOST_AFTER = 10.0
"""The Lost grace for this test: the default's 300 s over the Down window's 30 s, shortened."""

STALL = 4.0
"""As a 120 s stall is to the defaults (4 s of 10 as 120 of 300): well past Down, well within
Lost, with room for a loaded test machine."""


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text)


def test_a_stalled_agent_ends_no_job(tmp_path: Path) -> None:
    """node-a's agent is stopped (SIGSTOP) for 4 s with Down after 1.5 s and Lost after 10 s:
    meanwhile the machine is Down and its task still Running, shown with when the machine was
    last heard; once the agent continues, the same worker carries on (no stop, no message),
    and its run later Succeeds. (Before issue 25.3 no view said the machine was silent, and
    the default grace, 60 s, made a 120 s stall end the job.)"""
    cluster = Cluster(tmp_path)
    cluster.start({"ASTRAEUS_LOST_AFTER_SECONDS": str(LOST_AFTER)})
    try:
        agent = cluster.agent("node-a")
        cluster.submit("steady", 8)
        worker = cluster.started("steady")
        until(
            "steady's task to be Running",
            lambda: cluster.run("steady")["tasks"][0]["state"] == "Running",
        )

        agent.signal(signal.SIGSTOP)
        stopped = time.monotonic()
        until("node-a to be Down", lambda: cluster.machine("node-a")["state"] == "Down")
        run = cluster.run("steady")
        task = run["tasks"][0]
        assert (run["state"], task["state"]) == ("Running", "Running")
        assert task["machine_silent_since"] is not None
        assert run["machine_silent_since"] == task["machine_silent_since"]
        last_seen = cluster.machine("node-a")["last_seen"]
        assert _when(task["machine_silent_since"]) == _when(last_seen)
        time.sleep(max(0.0, STALL - (time.monotonic() - stopped)))
        assert time.monotonic() - stopped > DOWN_AFTER
        assert cluster.run("steady")["tasks"][0]["state"] == "Running"
        agent.signal(signal.SIGCONT)

        until("node-a to be Up", lambda: cluster.machine("node-a")["state"] == "Up")
        run = cluster.run("steady")
        task = run["tasks"][0]
        assert (run["state"], task["state"], task["message"]) == ("Running", "Running", None)
        assert run["machine_silent_since"] is task["machine_silent_since"] is None
        assert alive(worker["pid"])
        assert not (cluster.out / "steady.term").exists()
        time.sleep(LOST_AFTER - STALL + 1)  # past when the stall would have made it Lost
        assert cluster.run("steady")["tasks"][0]["state"] == "Running"
        cluster.release("steady")
        ended = until("steady to end", lambda: cluster.state("steady", "Succeeded", "Failed"))
        assert ended["state"] == "Succeeded"
        assert "SIGTERM sent" not in agent.output
    finally:
        cluster.agents["node-a"].signal(signal.SIGCONT)
        cluster.stop()
    assert invariants(cluster.coordinator.db) == {"Succeeded": 1}
