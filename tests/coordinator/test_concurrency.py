"""Many runs at once, with the real engine: no GPU is ever held by two live tasks."""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

from astraeus.coordinator.store import Store
from astraeus.shared.fake_gpu import gpu_uuid

from .conftest import ClientFactory, Cluster, make_cluster

MACHINES = 100
RUNS = 500


def assert_no_gpu_held_twice(store: Store) -> int:
    """The invariant, read from the tasks themselves (live ones, and Lost ones whose GPUs are
    still held): returns how many GPUs are held."""
    # One statement, so one snapshot of the file: the scheduler loop may commit between two.
    rows = store.database.read(
        "SELECT 'task' AS kind, machine, gpu_ids AS gpus FROM tasks"
        " WHERE state IN ('Assigned', 'Starting', 'Running') OR held = 1"
        " UNION ALL SELECT 'hold', machine, gpu_id FROM gpu_holds"
    )
    tasks = [row for row in rows if row["kind"] == "task"]
    held = Counter((row["machine"], gpu) for row in tasks for gpu in json.loads(row["gpus"]))
    twice = [key for key, count in held.items() if count > 1]
    assert twice == []
    for machine, gpu in held:
        assert gpu in {gpu_uuid(machine, i) for i in range(8)}
    holds = {(row["machine"], row["gpus"]) for row in rows if row["kind"] == "hold"}
    assert holds == set(held)
    return len(held)


async def _finish_some(c: Cluster, machine: str, rng: random.Random) -> None:
    """An agent reports, and ends about half of what it was given."""
    reply = await c.report(machine)
    updates = [
        {"task_uid": a["task_uid"], "state": "Succeeded", "exit_code": 0}
        for a in reply["assignments"]
        if rng.random() < 0.5
    ]
    if updates:
        await c.report(machine, updates)


async def test_500_concurrent_runs_on_100_machines(
    aiohttp_client: ClientFactory, tmp_path: Path
) -> None:
    """500 runs submitted at once while agents report and end tasks, with the scheduler loop
    running: afterwards no GPU is in two live tasks, and every run is placed or explained."""
    c = await make_cluster(aiohttp_client, tmp_path, scheduler=True, pass_debounce_seconds=0.01)
    rng = random.Random(7)  # noqa: S311 - a reproducible mix of sizes, not a secret
    await c.workspace("vision")
    await asyncio.gather(*(c.report(f"gpu-{i:03}") for i in range(MACHINES)))

    async def submit(i: int) -> tuple[int, Any]:
        ask = {"gpu_requests": {"count": rng.choice([1, 1, 2, 4, 8, 16])}}
        spec = {"name": f"run-{i}", "command": ["x"], "requested_resources": ask}
        return await c.call("POST", "/api/v1/runs", c.tokens["vision"], spec)

    results = await asyncio.gather(
        *(submit(i) for i in range(RUNS)),
        *(_finish_some(c, f"gpu-{i:03}", rng) for i in range(0, MACHINES, 3)),
    )
    assert [r[0] for r in results[:RUNS]] == [201] * RUNS
    for _ in range(3):
        await asyncio.gather(*(_finish_some(c, f"gpu-{i:03}", rng) for i in range(MACHINES)))
        assert_no_gpu_held_twice(c.store)
    await c.run_pass()
    held = assert_no_gpu_held_twice(c.store)
    assert 0 < held <= MACHINES * 8
    states = c.store.runs.counts_by_state()
    assert sum(states.values()) == RUNS
    assert states.get("Running", 0) > 0
    unexplained = c.store.database.read(
        "SELECT count(*) AS n FROM runs WHERE state = 'Pending' AND reason IS NULL"
    )
    assert unexplained[0]["n"] == 0
    c.store.close()
