"""Labels that grant access (`pool`, and those the `access_labels` setting lists) come from
admins only: the labels API, or bound when an agent token is made; never from a report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from astraeus.coordinator.machine_records import MachineRecords
from astraeus.coordinator.store import Store

from .conftest import ClientFactory, Cluster, make_cluster
from .fakes import report


async def test_an_agent_token_binds_the_machine_s_pool(cluster: Cluster) -> None:
    """`POST /tokens` with `labels` gives the agent's machine those labels as an admin's."""
    c = cluster
    member = await c.workspace("vision", pools=["h100"])
    body = {"role": "agent", "machine": "gpu-07", "labels": {"pool": "h100"}}
    status, made = await c.call("POST", "/api/v1/tokens", body=body)
    assert status == 201
    c.tokens["gpu-07"] = made["token"]
    await c.report("gpu-07", labels={"topology.astraeus.io/rack": "r1"})
    status, seen = await c.call("GET", "/api/v1/machines/gpu-07", member)
    assert (status, seen["labels"]) == (200, {"pool": "h100", "topology.astraeus.io/rack": "r1"})


async def test_only_an_agent_token_binds_labels(cluster: Cluster) -> None:
    """A member token with labels is refused, naming the field."""
    c = cluster
    await c.workspace("vision")
    body = {"role": "member", "workspace": "vision", "labels": {"pool": "h100"}}
    status, data = await c.call("POST", "/api/v1/tokens", body=body)
    assert (status, data["fields"]) == (
        400,
        [{"field": "labels", "problem": "is for agent tokens only"}],
    )


async def test_listed_access_labels_are_ignored_in_reports(
    aiohttp_client: ClientFactory, tmp_path: Path
) -> None:
    """With `access_labels = tenant`, a reported `tenant` (and `pool`) are dropped; other
    labels stay; an admin's `tenant` holds."""
    c = await make_cluster(aiohttp_client, tmp_path, access_labels=("pool", "tenant"))
    labels = {"tenant": "acme", "pool": "x", "topology.astraeus.io/rack": "r1"}
    await c.report("gpu-01", labels=labels)
    _, machine = await c.call("GET", "/api/v1/machines/gpu-01")
    assert machine["labels"] == {"topology.astraeus.io/rack": "r1"}
    await c.label("gpu-01", tenant="globex")
    await c.report("gpu-01", labels=labels)
    _, machine = await c.call("GET", "/api/v1/machines/gpu-01")
    assert machine["labels"] == {"tenant": "globex", "topology.astraeus.io/rack": "r1"}
    c.store.close()


async def test_a_pool_stored_from_an_agent_before_is_dropped_at_start(tmp_path: Path) -> None:
    """A report stored before this rule (its agent's `pool` in it) no longer grants the pool
    once the coordinator starts again."""
    store = Store.open(tmp_path / "astraeus.db")
    made: dict[str, Any] = report("gpu-01", labels={"pool": "vault", "zone": "a"})
    now = "2026-10-01T09:00:00+00:00"
    with store.database.write() as conn:
        conn.execute(
            "INSERT INTO machines (name, report, last_seen, created_at) VALUES (?, ?, ?, ?)",
            ("gpu-01", json.dumps(made), now, now),
        )
    store.close()
    again = Store.open(tmp_path / "astraeus.db")
    record = MachineRecords(again).get("gpu-01")
    assert record is not None
    assert record.labels == {"zone": "a"}
    again.close()
