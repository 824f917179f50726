"""Preemption by priority (issue 28.3), with the real placement engine: a waiting run that
would start if lower-priority runs were stopped stops the cheapest set of them (lowest
priority, then fewest GPUs, then most recently started), holds their machines while they leave,
and starts once their agents report them gone; the victims go back to the queue with their
submission time, and finish later. Never victims: `preemptible: false` runs and runs of equal
or higher priority. Off unless `preemption = "priority"`; a cluster-wide rate limit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import ClientFactory, Cluster, make_cluster

URGENT = 1000


@pytest.fixture
async def preempting(aiohttp_client: ClientFactory, tmp_path: Path) -> AsyncIterator[Cluster]:
    """A coordinator with the real engine and `preemption = "priority"`."""
    made = await make_cluster(aiohttp_client, tmp_path, preemption="priority")
    yield made
    made.store.close()


@pytest.fixture
async def one_a_minute(aiohttp_client: ClientFactory, tmp_path: Path) -> AsyncIterator[Cluster]:
    """Preemption on, at most one a minute."""
    made = await make_cluster(
        aiohttp_client, tmp_path, preemption="priority", preemption_max_per_minute=1
    )
    yield made
    made.store.close()


async def _get(c: Cluster, run: str, workspace: str) -> Any:
    status, view = await c.call("GET", f"/api/v1/runs/{run}", c.tokens[workspace])
    assert status == 200, view
    return view


async def _running(c: Cluster, machine: str, *runs: str) -> None:
    """The runs' workers (task 0 each) report Running on `machine`."""
    await c.report(machine, [{"task": f"{run}-0", "state": "Running"} for run in runs])


async def _ended(c: Cluster, machine: str, *runs: str, state: str = "Cancelled") -> None:
    """The runs' workers report their end on `machine` (a stopped worker ends Cancelled)."""
    updates = [{"task": f"{run}-0", "state": state, "signal": 15} for run in runs]
    if state == "Succeeded":
        updates = [{"task": f"{run}-0", "state": state, "exit_code": 0} for run in runs]
    await c.report(machine, updates)


def _cancelled(reply: dict[str, Any]) -> dict[str, float | None]:
    """The tasks the reply tells the agent to stop, with the grace chosen for each."""
    return {a["task"]: a["stop_grace_seconds"] for a in reply["assignments"] if a["cancel"]}


async def _full_cluster(c: Cluster) -> None:
    """h-01 (8 GPUs) runs `a` and `b` (audio, priority 0, 4 GPUs each; b started later); h-02
    (8 GPUs) runs `c` (audio, priority 5, 4 GPUs), `d` and `e` (audio, priority 0, 2 GPUs
    each). Vision may submit up to priority 1000."""
    await c.workspace("vision", max_priority=URGENT)
    await c.workspace("audio", max_priority=10)
    await c.report("h-01")
    await c.submit("audio", "a", gpus=4)
    assert (await c.run_pass()).placed == 1
    await _running(c, "h-01", "a")
    c.clock.advance(20)
    await c.report("h-01")
    await c.submit("audio", "b", gpus=4)
    assert (await c.run_pass()).placed == 1
    await _running(c, "h-01", "b")
    await c.report("h-02")
    await c.submit("audio", "c", gpus=4, priority=5)
    await c.submit("audio", "d", gpus=2)
    await c.submit("audio", "e", gpus=2)
    assert (await c.run_pass()).placed == 3
    await _running(c, "h-02", "c", "d", "e")
    for run, machine in (("a", "h-01"), ("b", "h-01"), ("c", "h-02"), ("d", "h-02")):
        assert (await _get(c, run, "audio"))["tasks"][0]["machine"] == machine


async def test_an_urgent_run_starts_after_exactly_the_cheapest_victims_stop(
    preempting: Cluster,
) -> None:
    """A priority-1000 run of 8 GPUs on a full cluster (it may take 4 GPUs on each machine)
    stops the cheapest runs that make room: d and e (priority 0, fewest GPUs), then b (priority
    0, 4 GPUs, started after a); never c (priority 5), and not a, which the others make
    unneeded. They are told to stop with the 30 s grace. While they leave their machines are
    held: a run behind that fits the GPUs d left does not take them. The urgent run starts
    once all three are gone; the victims go back to the queue with their submission time, say
    they were preempted (when, for what priority; never by which run: it is another
    workspace's), and come back and finish once it is done."""
    c = preempting
    await _full_cluster(c)
    submitted = {run: (await _get(c, run, "audio"))["submitted_at"] for run in "bde"}
    await c.submit("vision", "urgent", gpus=8, priority=URGENT)
    preempted_at = c.clock.now()
    assert (await c.run_pass()).placed == 0
    urgent = await _get(c, "urgent", "vision")
    assert (urgent["state"], urgent["reason_kind"]) == ("Pending", "Preempting")
    assert urgent["reason"] == "Next to run: preempting 3 runs, 8 GPUs"
    assert _cancelled(await c.report("h-01")) == {"b-0": 30.0}
    assert _cancelled(await c.report("h-02")) == {"d-0": 30.0, "e-0": 30.0}
    for run in "bde":
        view = await _get(c, run, "audio")
        assert (view["state"], view["preempted_for_priority"]) == ("Running", URGENT)
    # d is gone, b and e still stop: a 2-GPU run behind may not take d's GPUs on h-02.
    await c.submit("audio", "late", gpus=2)
    await _ended(c, "h-02", "d")
    d = await _get(c, "d", "audio")
    assert (d["state"], d["reason_kind"]) == ("Pending", "Preempted")
    assert (await c.run_pass()).placed == 0
    late = await _get(c, "late", "audio")
    assert (late["state"], late["reason"]) == (
        "Pending",
        "Queued behind a run of another workspace",
    )
    assert (await _get(c, "urgent", "vision"))["reason"] == (
        "Next to run: waits for the runs it preempted to stop"
    )
    await _ended(c, "h-02", "e")
    await _ended(c, "h-01", "b")
    for run in "bde":  # back in the queue (e and b until a pass says why each waits now)
        view = await _get(c, run, "audio")
        assert view["state"] == "Pending"
        if run != "d":
            assert view["reason_kind"] == "Preempted"
            assert view["reason"] == "Preempted by a higher-priority run"
        assert view["submitted_at"] == submitted[run]
        assert view["preempted_at"] == preempted_at.isoformat()
        assert (view["preemptions"], view["attempt"]) == (1, 2)
        assert view["attempts"][0]["reason"] == "Preempted by a higher-priority run (priority 1000)"
        assert "urgent" not in str(view)
    assert (await c.run_pass()).placed == 1
    urgent = await _get(c, "urgent", "vision")
    assert urgent["state"] == "Running"
    assert sorted(t["machine"] for t in urgent["tasks"]) == ["h-01", "h-02"]
    b = await _get(c, "b", "audio")
    assert (b["state"], b["preempted_for_priority"], b["reason_kind"]) == (
        "Pending",
        URGENT,
        "NextToRun",
    )
    for run in "ac":
        assert (await _get(c, run, "audio"))["state"] == "Running"
    # The urgent run finishes; the victims come back (before `late`: submitted earlier).
    for machine in ("h-01", "h-02"):
        task = next(t["name"] for t in urgent["tasks"] if t["machine"] == machine)
        await c.report(machine, [{"task": task, "state": "Running"}])
        await c.report(machine, [{"task": task, "state": "Succeeded", "exit_code": 0}])
    assert (await c.run_pass()).placed == 3
    assert (await _get(c, "late", "audio"))["state"] == "Pending"
    for machine, runs in (("h-01", "b"), ("h-02", "de")):
        reply = await c.report(machine)
        restarts = {a["task"]: a["restart_count"] for a in reply["assignments"]}
        assert {f"{run}-0": 1 for run in runs}.items() <= restarts.items()
        await _running(c, machine, *runs)
        await _ended(c, machine, *runs, state="Succeeded")
    for run in "bde":
        assert (await _get(c, run, "audio"))["state"] == "Succeeded"
    status, metrics = await c.call("GET", "/metrics")
    assert status == 200
    assert "astraeus_preemptions_total 1\n" in metrics
    assert "astraeus_preempted_runs_total 3\n" in metrics


async def test_a_run_marked_not_preemptible_is_never_a_victim(preempting: Cluster) -> None:
    """With `a` marked `preemptible: false`, no set of runs frees 8 GPUs on h-01: the urgent
    run waits and nothing is stopped. A 4-GPU urgent run stops `b` alone."""
    c = preempting
    await c.workspace("vision", max_priority=URGENT)
    await c.workspace("audio")
    await c.report("h-01")
    await c.submit("audio", "a", gpus=4, preemptible=False)
    await c.submit("audio", "b", gpus=4)
    assert (await c.run_pass()).placed == 2
    await _running(c, "h-01", "a", "b")
    assert (await _get(c, "a", "audio"))["preemptible"] is False
    await c.submit("vision", "urgent", gpus=8, priority=URGENT)
    await c.run_pass()
    urgent = await _get(c, "urgent", "vision")
    assert urgent["reason_kind"] != "Preempting"
    assert _cancelled(await c.report("h-01")) == {}
    status, _ = await c.call("POST", "/api/v1/runs/urgent/cancel", c.tokens["vision"])
    assert status == 200  # else, the head, it holds h-01 from runs behind it
    await c.submit("vision", "smaller", gpus=4, priority=URGENT)
    await c.run_pass()
    assert (await _get(c, "smaller", "vision"))["reason"] == (
        "Next to run: preempting 1 run, 4 GPUs"
    )
    assert _cancelled(await c.report("h-01")) == {"b-0": 30.0}


async def test_runs_of_equal_priority_are_never_preempted(preempting: Cluster) -> None:
    """A run of priority 10 never stops runs of priority 10 (nor higher)."""
    c = preempting
    await c.workspace("vision", max_priority=URGENT)
    await c.report("h-01")
    await c.submit("vision", "a", gpus=4, priority=10)
    await c.submit("vision", "b", gpus=4, priority=20)
    assert (await c.run_pass()).placed == 2
    await _running(c, "h-01", "a", "b")
    await c.submit("vision", "same", gpus=4, priority=10)
    await c.run_pass()
    same = await _get(c, "same", "vision")
    assert (same["state"], same["reason_kind"]) == ("Pending", "NoMachineFits")
    assert _cancelled(await c.report("h-01")) == {}


async def test_preemption_is_off_by_default(cluster: Cluster) -> None:
    """Without the setting an urgent run waits like any other, and nothing is stopped."""
    c = cluster
    await _full_cluster(c)
    await c.submit("vision", "urgent", gpus=8, priority=URGENT)
    await c.run_pass()
    urgent = await _get(c, "urgent", "vision")
    assert (urgent["state"], urgent["reason_kind"]) == ("Pending", "NoMachineFits")
    assert _cancelled(await c.report("h-01")) == _cancelled(await c.report("h-02")) == {}


async def test_the_rate_limit_holds(one_a_minute: Cluster) -> None:
    """At most one preemption a minute, cluster-wide: of two urgent runs, each of which would
    stop a run of its own, the second preempts only once a minute has passed since the
    first."""
    c = one_a_minute
    await c.workspace("vision", max_priority=URGENT)
    await c.workspace("audio")
    for machine, run in (("h-01", "a"), ("h-02", "b")):
        await c.report(machine)
        await c.submit("audio", run, gpus=8)
        assert (await c.run_pass()).placed == 1
        await _running(c, machine, run)
    await c.submit("vision", "urgent", gpus=8, priority=URGENT)
    await c.submit("vision", "second", gpus=8, priority=URGENT)
    await c.run_pass()
    assert (await _get(c, "urgent", "vision"))["reason_kind"] == "Preempting"
    assert (await _get(c, "second", "vision"))["reason_kind"] != "Preempting"
    first = set(_cancelled(await c.report("h-01"))) | set(_cancelled(await c.report("h-02")))
    assert len(first) == 1  # a or b: equal cost
    for seconds in (25, 25):
        c.clock.advance(seconds)
        await c.report("h-01")
        await c.report("h-02")
        await c.run_pass()
        assert (await _get(c, "second", "vision"))["reason_kind"] != "Preempting"
    c.clock.advance(11)
    await c.report("h-01")
    await c.report("h-02")
    await c.run_pass()
    assert (await _get(c, "second", "vision"))["reason"] == (
        "Next to run: preempting 1 run, 8 GPUs"
    )
    then = set(_cancelled(await c.report("h-01"))) | set(_cancelled(await c.report("h-02")))
    assert then == {"a-0", "b-0"}


async def test_a_dry_run_says_what_it_would_preempt(preempting: Cluster) -> None:
    """A dry run of the urgent run answers what it would stop, and stops nothing."""
    c = preempting
    await _full_cluster(c)
    spec = {
        "name": "urgent",
        "command": ["python", "train.py"],
        "priority": URGENT,
        "requested_resources": {"gpu_requests": {"count": 8}},
    }
    status, dry = await c.call("POST", "/api/v1/runs?dry_run=true", c.tokens["vision"], spec)
    assert status == 200, dry
    assert (dry["would_start"], dry["reason_kind"]) == (False, "Preempting")
    assert dry["reason"] == "would start after preempting 3 runs, 8 GPUs"
    assert _cancelled(await c.report("h-01")) == {}


async def test_preemption_settings_are_checked() -> None:
    """A wrong mode or limit is refused, naming the setting and what it takes."""
    from astraeus.coordinator.settings import load
    from astraeus.shared.settings import SettingsError

    with pytest.raises(SettingsError, match="ASTRAEUS_PREEMPTION: 'always' is not one of"):
        load(env={"ASTRAEUS_PREEMPTION": "always"})
    with pytest.raises(SettingsError, match="--preemption-max-per-minute: -1 is not a whole"):
        load(env={}, overrides={"preemption_max_per_minute": -1})
    settings = load(env={"ASTRAEUS_PREEMPTION": "priority"})
    assert (settings.preemption, settings.preemption_grace_seconds) == ("priority", 30.0)
    assert load(env={}).preemption == "off"


async def test_a_guarantee_is_reclaimed_and_a_run_within_its_guarantee_is_never_a_victim(
    cluster: Cluster,
) -> None:
    """Preemption off; audio is guaranteed 2 GPUs, vision 8, batch none. While vision is idle
    its GPUs are lent: audio runs a1 (2 GPUs, within its guarantee) and a2 (6, beyond it) on
    h-01, batch runs b1 (8, priority 10) on h-02. A 2-GPU run of vision (priority 0), below
    its guarantee, reclaims whatever the others' priority: of the runs beyond their
    workspaces' guarantees it stops the cheapest, a2 (a1, cheaper still, is within audio's
    guarantee: never a victim); a2 goes back to the queue `Reclaimed by a workspace within its
    guarantee`, and vision's run starts."""
    c = cluster
    await c.workspace("vision", guaranteed_gpus=8, gpu_quota=16)
    await c.workspace("audio", guaranteed_gpus=2)
    await c.workspace("batch", max_priority=10)
    await c.report("h-01")
    await c.submit("audio", "a1", gpus=2)
    await c.submit("audio", "a2", gpus=6)
    assert (await c.run_pass()).placed == 2
    await _running(c, "h-01", "a1", "a2")
    await c.report("h-02")
    await c.submit("batch", "b1", gpus=8, priority=10)
    assert (await c.run_pass()).placed == 1
    await _running(c, "h-02", "b1")
    await c.submit("vision", "v", gpus=2)
    assert (await c.run_pass()).placed == 0
    assert (await _get(c, "v", "vision"))["reason"] == "Next to run: preempting 1 run, 6 GPUs"
    assert _cancelled(await c.report("h-01")) == {"a2-0": 30.0}
    assert _cancelled(await c.report("h-02")) == {}
    await _ended(c, "h-01", "a2")
    a2 = await _get(c, "a2", "audio")
    assert (a2["state"], a2["reason_kind"], a2["reason"]) == (
        "Pending",
        "Reclaimed",
        "Reclaimed by a workspace within its guarantee",
    )
    assert (a2["preempted_reason"], a2["preempted_for_priority"]) == (a2["reason"], None)
    assert a2["attempts"][0]["reason"] == "Reclaimed by a workspace within its guarantee"
    assert (await c.run_pass()).placed == 1
    v = await _get(c, "v", "vision")

    assert (v["state"], v["tasks"][0]["machine"]) == ("Running", "h-01")
    assert (await _get(c, "a1", "audio"))["state"] == "Running"


async def test_a_run_within_its_guarantee_is_never_preempted_by_priority(
    preempting: Cluster,
) -> None:
    """Preemption on: audio's one run, within its 8-GPU guarantee, is no victim even of a
    priority-1000 run of another workspace."""
    c = preempting
    await c.workspace("vision", max_priority=URGENT)
    await c.workspace("audio", guaranteed_gpus=8)
    await c.report("h-01")
    await c.submit("audio", "a", gpus=8)
    assert (await c.run_pass()).placed == 1
    await _running(c, "h-01", "a")
    await c.submit("vision", "urgent", gpus=8, priority=URGENT)
    await c.run_pass()
    assert (await _get(c, "urgent", "vision"))["reason_kind"] != "Preempting"
    assert _cancelled(await c.report("h-01")) == {}


async def test_a_guarantee_above_the_gpu_quota_is_refused(cluster: Cluster) -> None:
    """`guaranteed_gpus` more than `gpu_quota`: 400, naming the field and the problem."""
    body = {"gpu_quota": 4, "guaranteed_gpus": 8}
    status, error = await cluster.call("PUT", "/api/v1/workspaces/vision", body=body)
    assert status == 400
    assert "guaranteed_gpus: 8 is more than gpu_quota 4" in str(error)


async def test_a_guarantee_is_reclaimed_only_up_to_the_guarantee(cluster: Cluster) -> None:
    """Vision, guaranteed 8 GPUs, submits two 8-GPU runs on a cluster batch fills: the first
    reclaims 8 GPUs; the second would take vision past its guarantee, so it reclaims nothing
    and waits behind."""
    c = cluster
    await c.workspace("vision", guaranteed_gpus=8)
    await c.workspace("batch")
    for machine, run in (("h-01", "b1"), ("h-02", "b2")):
        await c.report(machine)
        await c.submit("batch", run, gpus=8)
        assert (await c.run_pass()).placed == 1
        await _running(c, machine, run)
    await c.submit("vision", "v1", gpus=8)
    await c.submit("vision", "v2", gpus=8)
    await c.run_pass()
    assert (await _get(c, "v1", "vision"))["reason"] == "Next to run: preempting 1 run, 8 GPUs"
    assert (await _get(c, "v2", "vision"))["reason_kind"] != "Preempting"
    stopped = set(_cancelled(await c.report("h-01"))) | set(_cancelled(await c.report("h-02")))
    assert len(stopped) == 1
