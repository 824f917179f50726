"""Who decides pools: admins. A machine's agent claiming `pool=vault` gets none of vault's runs
(Kubernetes' NodeRestriction: a node never labels itself into access)."""

from __future__ import annotations

from pathlib import Path

from helpers import until_async

from .rig import Cluster, worker


async def test_an_agent_cannot_label_itself_into_a_pool(cluster: Cluster, tmp_path: Path) -> None:
    """m1's agent reports pool=vault: vault's run (with its DB_PASSWORD) waits, m1 never sees
    it, and the pool is not on m1; once an admin gives m1 the pool, the run starts there."""
    c = cluster
    vault = await c.workspace("vault", ["vault"])
    m1 = await c.machine("m1", agent_labels={"pool": "vault"})
    spec = {
        "name": "db-migrate",
        "command": worker("migrating", tmp_path / "done"),
        "env": {"DB_PASSWORD": "hunter2"},
        "requested_resources": {"gpu_requests": {"count": 1}},
    }
    await c.ok("POST", "/api/v1/runs", vault, spec)
    await c.run_pass()
    reports = m1.agent.reports
    await until_async("two more reports from m1", lambda: m1.agent.reports > reports + 1)
    run = await c.ok("GET", "/api/v1/runs/db-migrate", vault)
    assert (run["state"], run["reason"]) == ("Pending", "machine lacks label pool=vault")
    assert m1.runner.records == {}
    assert m1.scanner.scan().labels["pool"] == "vault"  # what it claims, every report
    machine = await c.ok("GET", "/api/v1/machines/m1")
    assert "pool" not in machine["labels"]
    assert "pool" not in machine["report"]["labels"]
    assert (await c.call("GET", "/api/v1/machines/m1", vault))[0] == 404

    await c.ok("PUT", "/api/v1/machines/m1/labels", body={"labels": {"pool": "vault"}})
    await c.run_pass()
    await until_async("m1 to start vault's run", lambda: len(m1.runner.records) == 1)
    (tmp_path / "done").write_text("")
