"""A real coordinator process on PostgreSQL: an agent's reports, a run submitted, placed and
seen Running; the coordinator restarted, the run and its task are still there, untouched."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import until

from .rig import Cluster

pytestmark = pytest.mark.slow  # real processes: a coordinator (twice) and an agent


@pytest.fixture
def pg_cluster(tmp_path: Path, postgresql_url: str) -> Iterator[Cluster]:
    made = Cluster(tmp_path, database_url=postgresql_url)
    made.start()
    yield made
    made.stop()


def _held(url: str) -> tuple[Counter[tuple[str, str]], set[tuple[str, str]]]:
    """GPUs held by live tasks (each should count once), and the `gpu_holds` rows."""
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT machine, gpu_ids FROM tasks"
            " WHERE state IN ('Assigned', 'Starting', 'Running') OR held = 1"
        ).fetchall()
        holds = {(m, g) for m, g in conn.execute("SELECT machine, gpu_id FROM gpu_holds")}
    return Counter((m, gpu) for m, gpus in rows for gpu in json.loads(gpus)), holds


def test_a_run_is_placed_runs_and_survives_a_restart(
    pg_cluster: Cluster, postgresql_url: str
) -> None:
    c = pg_cluster
    c.agent("node-a")
    c.submit("train", 4)
    worker = c.started("train")
    running = until(
        "train's task Running",
        lambda: (run := c.run("train"))["tasks"][0]["state"] == "Running" and run,
    )
    assert running["state"] == "Running"
    placed_on = running["tasks"][0]["machine"]
    assert placed_on == "node-a"

    assert c.coordinator.stop() == 0
    c.coordinator.start()
    again = c.run("train")
    assert (again["state"], again["tasks"][0]["state"]) == ("Running", "Running")
    assert again["tasks"][0]["machine"] == placed_on
    held, holds = _held(postgresql_url)
    assert sum(held.values()) == 4
    assert max(held.values()) == 1
    assert holds == set(held)

    c.release("train")
    done = until("train to succeed", lambda: c.state("train", "Succeeded", "Failed"))
    assert done["state"] == "Succeeded"
    assert worker["pid"] > 0
