"""A restore puts old work back on GPUs that newer workers still use: the agent stops the newer
workers first and starts the backup's task only once they have exited (docs/operator.md)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from .rig import BIN, PATIENT, Cluster, Process, until
from .test_backup import _restore

pytestmark = pytest.mark.slow  # real agent and coordinator processes, several report windows


def test_a_restored_task_waits_for_the_newer_worker_on_its_gpus(tmp_path: Path) -> None:
    """The backup is taken while `old` is placed on all 8 GPUs but not started (its agent
    paused); then `old` runs and ends, and `new` takes the 8 GPUs. Restored, the coordinator
    assigns `old` again and not `new`: `new` is stopped (half a second of cleaning up, as a
    real job's checkpoint) and `old` starts only after `new` has exited, never beside it."""
    cluster = Cluster(tmp_path)
    c = cluster.coordinator
    c.start(PATIENT)  # a paused agent must not make its machine Down
    c.ok("PUT", "/api/v1/workspaces/faults", {})
    body = {"role": "member", "workspace": "faults"}
    cluster.member = c.ok("POST", "/api/v1/tokens", body)["token"]
    agent = cluster.agent("gpu-01")
    try:
        agent.signal(signal.SIGSTOP)
        cluster.submit("old", 8)
        until("old to be placed", lambda: cluster.run("old")["tasks"][0]["state"] == "Assigned")
        copy = tmp_path / "backup.db"
        backup = Process(
            [str(BIN / "astraeus-coordinator"), "backup", "--db", str(c.db), str(copy)],
            tmp_path / "backup.log",
        )
        assert backup.wait() == 0, backup.output
        agent.signal(signal.SIGCONT)
        first = cluster.started("old")
        cluster.release("old")
        until("old to end", lambda: cluster.state("old", "Succeeded"))
        cluster.submit("new", 8)
        cluster.started("new")

        assert c.stop() == 0
        _restore(copy, c.db)
        c.start(PATIENT)
        term = cluster.out / "new.term"
        again = until(
            "old to start again",
            lambda: (
                (json.loads((cluster.out / "old.start").read_text()) != first)
                and json.loads((cluster.out / "old.start").read_text())
            ),
        )
        assert term.exists(), "old started while new still ran on its GPUs"
        assert again["at"] >= float(term.read_text())
    finally:
        agent.signal(signal.SIGCONT)
        cluster.stop()
