"""Fair share (issue 28.1) against the real scheduler and engine, on a simulated clock: two
workspaces flood an 8-GPU machine with 1-GPU runs of ten minutes; usage decides who goes next
among runs of equal priority."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from astraeus.coordinator.settings import SettingsError, load
from astraeus.coordinator.store.usage import decay

from .conftest import ClientFactory, Cluster, make_cluster

RUN_SECONDS = 600
STEP_SECONDS = 60
HOUR = 3600


async def _flood(c: Cluster, weights: dict[str, float], runs: int = 40) -> None:
    """Each workspace (with its weight) submits `runs` 1-GPU runs, the first all of its runs
    before the second submits any: first come would take everything."""
    for name, weight in weights.items():
        await c.workspace(name, fair_share_weight=weight)
    await c.report("gpu-01", gpus=8)
    for name in weights:
        for i in range(runs):
            await c.submit(name, f"{name}-{i}", gpus=1)


async def _run_for(c: Cluster, seconds: int) -> None:
    """Passes every simulated minute, after the machine's report; each run's worker ends
    `RUN_SECONDS` after it was assigned, as its agent reports."""
    await c.run_pass()
    for _ in range(seconds // STEP_SECONDS):
        c.clock.advance(STEP_SECONDS)
        cutoff = (c.clock.now() - timedelta(seconds=RUN_SECONDS)).isoformat()
        done = c.store.database.read(
            "SELECT name FROM tasks WHERE state IN ('Assigned', 'Running') AND assigned_at <= ?",
            (cutoff,),
        )
        updates = [{"task": row["name"], "state": "Succeeded", "exit_code": 0} for row in done]
        await c.report("gpu-01", updates, gpus=8)  # every step: the machine stays Up
        await c.run_pass()


async def _usage(c: Cluster, token: str | None = None) -> dict[str, Any]:
    status, data = await c.call("GET", "/api/v1/usage", token)
    assert status == 200, data
    return data  # type: ignore[no-any-return]


def _hours(data: dict[str, Any]) -> dict[str, float]:
    return {row["workspace"]: row["gpu_hours_day"] for row in data["workspaces"]}


async def test_equal_weights_share_the_gpus_half_and_half(cluster: Cluster) -> None:
    """Over one simulated hour each workspace gets 50 % ± 10 % of the GPU-hours, though
    `alpha` submitted all its runs first."""
    c = cluster
    await _flood(c, {"alpha": 1, "beta": 1})
    await _run_for(c, HOUR)
    hours = _hours(await _usage(c))
    total = hours["alpha"] + hours["beta"]
    assert total == pytest.approx(8.0, rel=0.05)  # the cluster stayed full
    assert 0.4 <= hours["beta"] / total <= 0.6, hours


async def test_weight_two_gets_about_twice_the_share(cluster: Cluster) -> None:
    """Weight 2 against weight 1: two thirds of the GPU-hours, ± 10 points (between 1.5 and
    3 times the other's)."""
    c = cluster
    await _flood(c, {"small": 1, "big": 2})
    await _run_for(c, HOUR)
    hours = _hours(await _usage(c))
    share = hours["big"] / (hours["big"] + hours["small"])
    assert 0.5667 <= share <= 0.7667, hours


async def test_priority_still_comes_first(cluster: Cluster) -> None:
    """A workspace with far more usage still goes first with a higher priority."""
    c = cluster
    await c.workspace("busy", max_priority=10)
    await c.workspace("idle")
    await c.report("gpu-01", gpus=8)
    for i in range(8):
        await c.submit("busy", f"warm-{i}", gpus=1)
    await _run_for(c, RUN_SECONDS)
    await c.submit("idle", "low", gpus=8)
    await c.submit("busy", "urgent", gpus=8, priority=10)
    await c.run_pass()
    _, urgent = await c.call("GET", "/api/v1/runs/urgent", c.tokens["busy"])
    assert urgent["state"] == "Running"


async def test_usage_survives_a_restart(
    aiohttp_client: ClientFactory, tmp_path: Path, database_location: Path | str
) -> None:
    """Usage is counted from the task rows and kept in the database (a SQLite file, or a
    PostgreSQL database): a new coordinator on it shows the same figures and goes on
    counting."""
    c = await make_cluster(aiohttp_client, tmp_path, database=database_location)
    await c.workspace("alpha")
    await c.report("gpu-01", gpus=8)
    await c.submit("alpha", "train", gpus=4)
    await c.run_pass()
    c.clock.advance(HOUR)
    await c.report("gpu-01", gpus=8)
    await c.run_pass()
    before = await _usage(c)
    assert before["workspaces"][0]["gpu_hours_day"] == pytest.approx(4.0)
    c.store.close()
    again = await make_cluster(aiohttp_client, tmp_path, clock=c.clock, database=database_location)
    after = await _usage(again)
    assert after["workspaces"] == before["workspaces"]
    again.clock.advance(HOUR)  # the worker kept running meanwhile
    await again.run_pass()
    assert (await _usage(again))["workspaces"][0]["gpu_hours_day"] == pytest.approx(8.0)
    again.store.close()


async def test_a_member_sees_only_their_own_workspace(cluster: Cluster) -> None:
    c = cluster
    await _flood(c, {"alpha": 1, "beta": 1}, runs=6)
    await _run_for(c, 2 * STEP_SECONDS)
    mine = await _usage(c, c.tokens["beta"])
    assert [row["workspace"] for row in mine["workspaces"]] == ["beta"]
    assert "alpha" not in str(mine)
    assert mine["cluster"]["gpus"] == 8
    assert mine["cluster"]["gpus_in_use"] == 8
    everyone = await _usage(c)
    assert [row["workspace"] for row in everyone["workspaces"]] == ["alpha", "beta"]
    alpha = everyone["workspaces"][0]
    assert (alpha["gpus_now"], alpha["share_now"], alpha["runs_waiting"]) == (6, 0.75, 0)
    assert everyone["workspaces"][1]["runs_waiting"] == 4


async def test_metrics_export_gpu_seconds(cluster: Cluster) -> None:
    c = cluster
    await _flood(c, {"alpha": 1}, runs=2)
    await _run_for(c, 2 * STEP_SECONDS)
    response = await c.client.get("/metrics", headers=c.auth())
    text = await response.text()
    assert 'astraeus_workspace_gpu_seconds_total{workspace="alpha"} 240' in text


@pytest.mark.parametrize(
    ("weight", "problem"),
    [
        (0, "must be more than 0"),
        (-1, "must be more than 0"),
        (1e9, "must be at most 1000000"),
        ("heavy", "valid number"),
    ],
)
async def test_bad_weights_get_400_naming_the_field(
    cluster: Cluster, weight: object, problem: str
) -> None:
    status, data = await cluster.call(
        "PUT", "/api/v1/workspaces/alpha", body={"fair_share_weight": weight}
    )
    assert status == 400, data
    assert [f["field"] for f in data["fields"]] == ["fair_share_weight"]
    assert problem in data["fields"][0]["problem"]


async def test_the_weight_is_kept_and_shown(cluster: Cluster) -> None:
    c = cluster
    await c.workspace("alpha", fair_share_weight=2.5)
    status, data = await c.call("GET", "/api/v1/workspaces/alpha")
    assert (status, data["fair_share_weight"]) == (200, 2.5)
    usage = await _usage(c, c.tokens["alpha"])
    assert usage["workspaces"][0]["weight"] == 2.5


def test_half_life_setting(tmp_path: Path) -> None:
    assert load(env={}).fair_share_half_life_seconds == 604800
    env = {"ASTRAEUS_FAIR_SHARE_HALF_LIFE_SECONDS": "3600"}
    assert load(env=env).fair_share_half_life_seconds == 3600
    with pytest.raises(SettingsError, match="ASTRAEUS_FAIR_SHARE_HALF_LIFE_SECONDS"):
        load(env={"ASTRAEUS_FAIR_SHARE_HALF_LIFE_SECONDS": "0"})


def test_usage_decays_with_the_half_life() -> None:
    assert decay(604800, 604800) == pytest.approx(0.5)
    assert decay(3600, 7200) == pytest.approx(0.25)
    assert decay(3600, 0) == 1.0


async def test_a_dry_run_waits_only_behind_what_fair_share_puts_ahead(cluster: Cluster) -> None:
    """A dry run of a workspace that has used nothing is not put behind the equal-priority
    runs of one that used the cluster: it would start on the GPUs they wait for."""
    c = cluster
    await c.workspace("alpha")
    beta = await c.workspace("beta")
    await c.report("gpu-01", gpus=8)
    for i in range(8):
        await c.submit("alpha", f"warm-{i}", gpus=1)
    await c.run_pass()
    c.clock.advance(RUN_SECONDS / 2)
    await c.report("gpu-01", gpus=8)
    await c.run_pass()  # alpha's usage counted
    for i in range(8):
        await c.submit("alpha", f"more-{i}", gpus=1)
    c.clock.advance(RUN_SECONDS / 2)
    ended = [{"task": f"warm-{i}-0", "state": "Succeeded", "exit_code": 0} for i in range(8)]
    await c.report("gpu-01", ended, gpus=8)
    spec = {
        "name": "probe",
        "command": ["x"],
        "requested_resources": {"gpu_requests": {"count": 8}},
    }
    status, dry = await c.call("POST", "/api/v1/runs?dry_run=true", beta, spec)
    assert (status, dry["would_start"]) == (200, True), dry
