"""The policy simulator (`benchmarks/policy_sim.py`) at a tiny size: every run is accounted
for, the figures stay in their ranges, the workload is the same for every policy and drawn from
the published figures it names, and the switches it compares (`fair_share`, `backfill`) are
settings an operator can give."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType

import pytest

from astraeus.coordinator.settings import load
from astraeus.shared.settings import SettingsError

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "policy_sim.py"


def _load() -> ModuleType:
    # The script imports its sibling modules (coordinator_rig, coordinator_bench), as it does
    # when run as `python benchmarks/policy_sim.py`, which puts its folder on the path.
    if str(SCRIPT.parent) not in sys.path:
        sys.path.append(str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("policy_sim", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["policy_sim"] = module
    spec.loader.exec_module(module)
    return module


sim = _load()

MACHINES = 2
RUNS = 40
FLOOD = 8
"""Philly's runs are long (mean 16.8 h): 40 of them oversubscribe 2 machines, not more."""
REPLAYED = 20
"""Runs replayed once per policy: enough to queue on 2 machines, few enough to stay quick."""


def test_the_workload_is_seeded_and_asks_the_load_given() -> None:
    """The same seed gives the same runs; the flood submits within its first minutes; the
    GPU-seconds asked within the window of submissions are the load asked for."""
    jobs = sim.workload(RUNS, MACHINES, 1.5, seed=3, flood=FLOOD)
    assert jobs == sim.workload(RUNS, MACHINES, 1.5, seed=3, flood=FLOOD)
    assert jobs != sim.workload(RUNS, MACHINES, 1.5, seed=4, flood=FLOOD)
    assert len(jobs) == RUNS
    assert all(job.submit <= sim.FLOOD_SECONDS for job in jobs if job.workspace == "flood")
    window = max(job.submit for job in jobs)
    asked = sim.asked_within(jobs, window)
    assert asked / (MACHINES * sim.GPUS_PER_MACHINE * window) == pytest.approx(1.5, rel=0.1)
    for job in jobs:
        assert job.time_limit >= job.duration * sim.LIMIT_FACTOR or (
            job.time_limit == sim.LIMIT_STEPS[-1]
        )


def test_the_workload_draws_from_the_published_figures() -> None:
    """GPUs from Philly's counts (as Gavel samples them), durations in Gavel's 10**1.5 to 10**4
    minutes, the steady runs spread over Philly's virtual clusters (the bigger ones more), and
    the flood exactly `--flood-runs` runs."""
    rng = random.Random(7)  # noqa: S311 - a reproducible draw, not a secret
    draws = [sim.draw_size(rng) for _ in range(4000)]
    assert {gpus for gpus, _ in draws} == {gpus for gpus, _share in sim.PHILLY_GPUS}
    assert sum(1 for gpus, _ in draws if gpus == 1) / len(draws) == pytest.approx(0.70, abs=0.03)
    assert all(60 * 10**1.5 <= duration <= 60 * 10**4 for _, duration in draws)
    long = sum(1 for _, duration in draws if duration > 60 * 10**3) / len(draws)
    assert long == pytest.approx(0.20, abs=0.03)
    jobs = sim.workload(600, 50, 1.2, seed=7, flood=50)
    by_workspace: dict[str, int] = {}
    for job in jobs:
        by_workspace[job.workspace] = by_workspace.get(job.workspace, 0) + 1
    assert by_workspace.pop(sim.FLOOD) == 50
    assert set(by_workspace) == set(sim.STEADY)
    biggest, smallest = "vc-6214e9", "vc-103959"  # 64 and 8 machines
    assert by_workspace[biggest] > 4 * by_workspace[smallest]


def test_the_flood_is_a_parameter_with_the_issue_s_default() -> None:
    """1,000 flood runs in the default 12,000, the same share at other sizes; more flood runs
    than runs is refused naming the option."""
    assert sim.flood_default(sim.DEFAULT_RUNS) == 1000
    assert sim.flood_default(1200) == 100
    with pytest.raises(ValueError, match=r"--flood-runs 41: must be from 0 to the 40 runs"):
        sim.workload(RUNS, MACHINES, 1.5, seed=3, flood=41)


def test_time_limits_round_up_to_steps_people_type() -> None:
    assert sim.time_limit(600) == 1800  # 20 minutes asked: half an hour
    assert sim.time_limit(1800) == 3600
    assert sim.time_limit(5 * 3600) == 12 * 3600
    assert sim.time_limit(30 * 86400) == 7 * 86400


def test_jain_and_water_filling() -> None:
    """Jain's index is 1 for equal shares and 1/n when one takes everything; max-min shares
    give small demands in full and split the rest evenly."""
    assert sim.jain([2.0, 2.0, 2.0]) == pytest.approx(1.0)
    assert sim.jain([1.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)
    shares = sim.water_fill({"a": 10.0, "b": 100.0, "c": 100.0}, 90.0)
    assert shares == pytest.approx({"a": 10.0, "b": 40.0, "c": 40.0})
    assert sum(shares.values()) == pytest.approx(90.0)


def test_weighted_water_filling_shares_by_weight() -> None:
    """Weighted max-min: what small demands leave is split in proportion to the weights; with
    every weight 1 it is the plain max-min above."""
    shares = sim.water_fill({"a": 10.0, "b": 100.0, "c": 100.0}, 90.0, {"a": 1, "b": 1, "c": 2})
    assert shares == pytest.approx({"a": 10.0, "b": 80.0 / 3, "c": 160.0 / 3})
    assert sim.water_fill({"a": 100.0, "b": 100.0}, 80.0, {"a": 1, "b": 3}) == pytest.approx(
        {"a": 20.0, "b": 60.0}
    )
    demand = {"a": 10.0, "b": 100.0, "c": 100.0}
    assert sim.water_fill(demand, 90.0, dict.fromkeys(demand, 1.0)) == sim.water_fill(demand, 90.0)


def test_weights_by_machines_follow_the_virtual_clusters() -> None:
    """`--weights machines`: each virtual cluster weighs its machines; the flood weighs as a
    virtual cluster submitting as many runs would (32 at the issue's 1,000 in 12,000, scaled);
    `equal` gives 1 each; anything else is refused naming the option."""
    jobs = sim.workload(1200, 100, 1.2, seed=28, flood=100)
    given = sim.weights("machines", jobs)
    assert {w: given[w] for w in sim.STEADY} == {
        f"vc-{vc}": float(machines) for vc, machines in sim.PHILLY_VCS
    }
    assert given[sim.FLOOD] == 32.0
    assert set(sim.weights("equal", jobs).values()) == {1.0}
    with pytest.raises(ValueError, match=r"--weights size: must be one of equal, machines"):
        sim.weights("size", jobs)


async def test_every_policy_accounts_for_every_run(tmp_path: Path) -> None:
    """Each built policy replays the tiny workload through the real scheduler until every run
    has started: utilisation is a share, no wait is negative, Jain's index lies in [1/n, 1],
    and the GPU-seconds received add up to the utilisation."""
    jobs = sim.workload(REPLAYED, MACHINES, 1.5, seed=5, flood=FLOOD // 2)
    window = max(job.submit for job in jobs)
    workspaces = {job.workspace for job in jobs}
    for policy in sim.POLICIES:
        if not sim.built(policy):
            continue
        outcome = await sim.simulate(jobs, MACHINES, policy, window)
        assert outcome.started == outcome.runs == REPLAYED, policy.name
        assert 0.0 < outcome.utilisation <= 1.0, policy.name
        assert min(outcome.mean_wait, outcome.p95_wait, outcome.p95_wait_1gpu) >= 0.0
        assert 1 / len(workspaces) <= outcome.jain <= 1.0 + 1e-9, policy.name
        capacity = MACHINES * sim.GPUS_PER_MACHINE * window
        assert sum(outcome.received.values()) == pytest.approx(outcome.utilisation * capacity)
        assert sum(outcome.entitled.values()) <= capacity * (1 + 1e-9)


async def test_a_replay_by_machines_gives_the_scheduler_those_weights(tmp_path: Path) -> None:
    """With `--weights machines` the workspaces the scheduler orders by carry the weights, and
    the entitlements Jain's index reads are the weighted max-min shares of the same demand."""
    jobs = sim.workload(REPLAYED, MACHINES, 1.5, seed=5, flood=FLOOD // 2)
    window = max(job.submit for job in jobs)
    policy = next(p for p in sim.POLICIES if p.name == "fair share + backfill")
    replay = sim.Simulation(jobs, MACHINES, policy, tmp_path, sim.TICK, "machines")
    try:
        await replay.run()
        stored = {w.name: w.fair_share_weight for w in replay.store.workspaces.all()}
        outcome = replay.measure(window, 0.0)
    finally:
        replay.store.close()
    assert stored == sim.weights("machines", jobs)
    assert outcome.started == REPLAYED
    demand: dict[str, float] = {}
    for job in jobs:
        share = job.gpus * max(0.0, min(job.duration, window - job.submit))
        demand[job.workspace] = demand.get(job.workspace, 0.0) + share
    capacity = MACHINES * sim.GPUS_PER_MACHINE * window
    assert outcome.entitled == pytest.approx(sim.water_fill(demand, capacity, stored))


def test_the_table_says_what_is_not_built() -> None:
    """A policy whose setting does not exist yet gets its column, saying so."""
    missing = sim.Policy("x", {}, needs="no_such_setting")
    assert not sim.built(missing)
    assert "not built yet" in sim.table([missing])


def test_fair_share_and_backfill_are_settings(tmp_path: Path) -> None:
    """Both default to on; an operator turns them off in the file or the environment; a value
    that is not a boolean is refused naming the setting."""
    defaults = load(env={"HOME": str(tmp_path)})
    assert defaults.fair_share is True
    assert defaults.backfill is True
    config = tmp_path / "coordinator.toml"
    config.write_text("fair_share = false\nbackfill = false\n")
    off = load(config=config, env={"HOME": str(tmp_path)})
    assert (off.fair_share, off.backfill) == (False, False)
    with pytest.raises(SettingsError, match=r"ASTRAEUS_BACKFILL: .* is not true or false"):
        load(env={"HOME": str(tmp_path), "ASTRAEUS_BACKFILL": "sometimes"})
