"""A partition: an agent cut off from the coordinator until its task is Lost, then back with
the worker still running."""

from __future__ import annotations

import json

import pytest
from helpers import Proxy, until

from .rig import Cluster, alive, invariants

pytestmark = pytest.mark.slow  # real processes through a partition past the Lost grace

STOPPED = "cancelled: no longer assigned by the coordinator; stopped with SIGTERM"


def test_a_partition_never_gives_a_gpu_twice(cluster: Cluster) -> None:
    """While node-a is cut off its task turns Lost but its GPUs stay held, so the run waiting
    for them is not placed; when node-a comes back still running the worker, its agent stops
    the worker and reports it, and only then does the waiting run get the GPUs."""
    proxy = Proxy(cluster.coordinator.port)
    try:
        cluster.agent("node-a", proxy.url)
        cluster.submit("cut", 8)
        cut = cluster.started("cut")
        until("cut to be Running", lambda: cluster.state("cut", "Running"))
        cluster.submit("next", 8)

        proxy.cut()
        lost = until("cut's task to be Lost", lambda: cluster.state("cut", "Failed"))
        assert lost["tasks"][0]["state"] == "Lost"
        assert cluster.machine("node-a")["gpus_free"] == 0
        assert cluster.run("next")["state"] == "Pending"
        assert alive(cut["pid"])
        proxy.heal()

        following = cluster.started("next")
        term = float((cluster.out / "cut.term").read_text())
        assert term < following["at"]  # the old worker had ended before the new one started
        assert not alive(cut["pid"])
        task = cluster.run("cut")["tasks"][0]
        assert task["state"] == "Lost"
        assert task["message"].startswith("machine node-a stopped reporting at ")
        assert task["message"].endswith(f" ({STOPPED})")
        assert "; its worker ended at " in task["message"]
        view = cluster.run("next")
        assert view["tasks"][0]["assigned_gpu_ids"] == lost["tasks"][0]["assigned_gpu_ids"]
        log = cluster.agents["node-a"].output
        assert f"task cut-0: {STOPPED.split(';')[0]}; SIGTERM sent" in log
        cluster.release("next")
        until("next to end", lambda: cluster.state("next", "Succeeded"))
    finally:
        proxy.close()
    cluster.stop()
    assert invariants(cluster.coordinator.db) == {"Failed": 1, "Succeeded": 1}
    assert json.loads((cluster.out / "next.start").read_text())["pid"] != cut["pid"]
