"""Backfill by time limit: a run behind the head may use the head's machines when its own time
limit ends before they free up, and the head says when it expects to start."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from .conftest import Cluster

HOUR = 3600


async def _head_waiting_on_h01(c: Cluster) -> tuple[str, datetime]:
    """h-01 (8 GPUs) runs `filler` (4 GPUs, one hour's limit, started now); `big` (8 GPUs,
    priority 10) waits for it as the head. Returns the member's token and when filler's limit
    ends."""
    member = await c.workspace("vision", max_priority=10)
    await c.report("h-01")
    await c.submit("vision", "filler", gpus=4, time_limit_seconds=HOUR)
    assert (await c.run_pass()).placed == 1
    await c.report("h-01", [{"task": "filler-0", "state": "Running"}])
    ends = c.clock.now() + timedelta(seconds=HOUR)
    await c.submit("vision", "big", gpus=8, priority=10)
    return member, ends


async def _stopped_at_limits(c: Cluster, machine: str, *tasks: str) -> None:
    """`machine`'s agent reports `tasks` stopped at their time limits (SIGTERM's exit 143)."""
    await c.report(machine, [{"task": t, "state": "Failed", "exit_code": 143} for t in tasks])


def _by(at: datetime) -> str:
    """The minute the head starts by, as its reason writes it."""
    at = at.astimezone(UTC)
    if at.second or at.microsecond:
        at = at.replace(second=0, microsecond=0) + timedelta(minutes=1)
    return at.strftime("%Y-%m-%d %H:%M UTC")


async def test_a_short_run_backfills_in_front_of_the_head(cluster: Cluster) -> None:
    """A 10-minute run takes 2 of the 4 GPUs free beside filler while big waits for all 8: it
    ends long before filler's limit frees h-01. Runs whose limit ends later, or with none,
    wait behind big. big says when it expects to start, and starts then."""
    c = cluster
    member, ends = await _head_waiting_on_h01(c)
    await c.submit("vision", "short", gpus=2, time_limit_seconds=600)
    await c.submit("vision", "long", gpus=2, time_limit_seconds=2 * HOUR)
    await c.submit("vision", "endless", gpus=2)
    assert (await c.run_pass()).placed == 1
    _, short = await c.call("GET", "/api/v1/runs/short", member)
    assert (short["state"], short["tasks"][0]["machine"]) == ("Running", "h-01")
    for name in ("long", "endless"):
        _, run = await c.call("GET", f"/api/v1/runs/{name}", member)
        assert (run["state"], run["reason"]) == ("Pending", "Queued behind big"), name
    _, big = await c.call("GET", "/api/v1/runs/big", member)
    assert big["reason_kind"] == "NextToRun"
    assert big["reason"] == (
        f"Next to run, expected to start by {_by(ends)} when runs on h-01 reach their time"
        " limits: No machine fits: 1 of 1 machines ready"
    )
    # Both reach their limits (the agent stops them there); big starts by its expected start.
    c.clock.advance(HOUR)
    await _stopped_at_limits(c, "h-01", "short-0", "filler-0")
    assert c.clock.now() <= ends
    assert (await c.run_pass()).placed == 1
    _, big = await c.call("GET", "/api/v1/runs/big", member)
    assert big["state"] == "Running"


async def test_no_backfill_when_the_head_s_machines_have_a_task_without_a_limit(
    cluster: Cluster,
) -> None:
    """A task without a time limit on the head's machine: when it frees up is not known, so
    nothing backfills there and the head names no expected start."""
    c = cluster
    member = await c.workspace("vision", max_priority=10)
    await c.report("h-01")
    await c.submit("vision", "filler", gpus=4)
    await c.run_pass()
    await c.report("h-01", [{"task": "filler-0", "state": "Running"}])
    await c.submit("vision", "big", gpus=8, priority=10, requested_resources={"machines": 1})
    await c.submit("vision", "short", gpus=2, time_limit_seconds=600)
    assert (await c.run_pass()).placed == 0
    _, big = await c.call("GET", "/api/v1/runs/big", member)
    assert big["reason"] == "Next to run: No machine fits: 1 of 1 machines ready"
    _, short = await c.call("GET", "/api/v1/runs/short", member)
    assert short["reason"] == "Queued behind big"


async def test_a_run_ending_within_the_margin_of_the_expected_start_waits(
    cluster: Cluster,
) -> None:
    """Filler's limit ends in an hour; a run of 59 minutes 30 s would end inside the minute a
    placed worker may take to start: it waits behind big."""
    c = cluster
    member, _ = await _head_waiting_on_h01(c)
    await c.submit("vision", "close", gpus=2, time_limit_seconds=HOUR - 30)
    assert (await c.run_pass()).placed == 0
    _, close = await c.call("GET", "/api/v1/runs/close", member)
    assert close["reason"] == "Queued behind big"


async def test_a_lost_task_still_held_leaves_the_end_unknown(cluster: Cluster) -> None:
    """A Lost task whose GPUs are still held may still run (its machine is silent): when they
    free up is not known, so no backfill on that machine."""
    c = cluster
    member, _ = await _head_waiting_on_h01(c)
    c.clock.advance(301)  # past lost_after: filler is Lost, its GPUs still held
    await c.run_pass()
    await c.report("h-01")
    _, filler = await c.call("GET", "/api/v1/runs/filler", member)
    assert filler["tasks"][0]["state"] == "Lost"
    await c.submit("vision", "short", gpus=2, time_limit_seconds=600)
    await c.run_pass()
    _, short = await c.call("GET", "/api/v1/runs/short", member)
    assert (short["state"], short["reason"]) == ("Pending", "Queued behind big")
    _, big = await c.call("GET", "/api/v1/runs/big", member)
    assert big["reason"] == "Next to run: No machine fits: 1 of 1 machines ready"


async def test_a_ten_minute_run_backfills_in_front_of_a_held_64_gpu_head(
    cluster: Cluster,
) -> None:
    """The issue's case: eight 8-GPU machines each run a 4-GPU filler with an hour's limit; a
    64-GPU run waits for all of them as the head. A 10-minute 2-GPU run starts on the held
    machines at once; the head says when it expects to start, and starts then, when the
    fillers (and the short run, long done) have reached their limits."""
    c = cluster
    member = await c.workspace("vision", max_priority=10)
    machines = [f"h-{i:02}" for i in range(1, 9)]
    for name in machines:
        await c.report(name)
    for i, name in enumerate(machines):
        await c.submit(
            "vision",
            f"filler-{i}",
            gpus=4,
            time_limit_seconds=HOUR,
            requested_resources={"node_selection": {"names": [name]}},
        )
    assert (await c.run_pass()).placed == 8
    for i, name in enumerate(machines):
        await c.report(name, [{"task": f"filler-{i}-0", "state": "Running"}])
    ends = c.clock.now() + timedelta(seconds=HOUR)
    await c.submit("vision", "big", gpus=64, priority=10)
    await c.submit("vision", "ten-minutes", gpus=2, time_limit_seconds=600)
    assert (await c.run_pass()).placed == 1
    _, short = await c.call("GET", "/api/v1/runs/ten-minutes", member)
    assert short["state"] == "Running"
    assert short["tasks"][0]["machine"] in machines
    _, big = await c.call("GET", "/api/v1/runs/big", member)
    assert big["reason_kind"] == "NextToRun"
    assert big["reason"].startswith(
        f"Next to run, expected to start by {_by(ends)} when runs on h-01, h-02, h-03 and 5"
        " more reach their time limits: "
    )
    machine = short["tasks"][0]["machine"]
    c.clock.advance(600)
    await _stopped_at_limits(c, machine, "ten-minutes-0")
    assert (await c.run_pass()).placed == 0
    c.clock.advance(HOUR - 600)
    for i, name in enumerate(machines):
        await _stopped_at_limits(c, name, f"filler-{i}-0")
    assert c.clock.now() <= ends
    assert (await c.run_pass()).placed == 1
    _, big = await c.call("GET", "/api/v1/runs/big", member)
    assert big["state"] == "Running"
    assert sorted({task["machine"] for task in big["tasks"]}) == machines


DAY = 24 * HOUR


async def _busy(c: Cluster, limits: dict[str, int]) -> None:
    """Each machine named in `limits` (8 GPUs) runs a 4-GPU filler with that time limit."""
    for name in limits:
        await c.report(name)
    for name, limit in limits.items():
        await c.submit(
            "vision",
            f"filler-{name}",
            gpus=4,
            time_limit_seconds=limit,
            requested_resources={"node_selection": {"names": [name]}},
        )
    assert (await c.run_pass()).placed == len(limits)
    for name in limits:
        await c.report(name, [{"task": f"filler-{name}-0", "state": "Running"}])


async def test_the_head_holds_the_machine_that_frees_up_first(cluster: Cluster) -> None:
    """h-01's filler may run 7 days, h-02's one hour: big (8 GPUs on one machine) holds h-02,
    not h-01 (the first by name, which an idle cluster would give it), and expects to start in
    an hour. A short run backfills on h-02; a run without a time limit may not use h-02 but
    starts on h-01, which no head holds. big starts by its expected start."""
    c = cluster
    member = await c.workspace("vision", max_priority=10)
    await _busy(c, {"h-01": 7 * DAY, "h-02": HOUR})
    ends = c.clock.now() + timedelta(seconds=HOUR)
    await c.submit("vision", "big", gpus=8, priority=10, requested_resources={"machines": 1})
    on_h02 = {"node_selection": {"names": ["h-02"]}}
    await c.submit("vision", "short", gpus=2, time_limit_seconds=600, requested_resources=on_h02)
    await c.submit("vision", "endless-h02", gpus=2, requested_resources=on_h02)
    await c.submit("vision", "endless", gpus=2)
    assert (await c.run_pass()).placed == 2
    _, big = await c.call("GET", "/api/v1/runs/big", member)
    assert big["reason_kind"] == "NextToRun"
    assert big["reason"].startswith(
        f"Next to run, expected to start by {_by(ends)} when runs on h-02 reach their time limits: "
    )
    _, short = await c.call("GET", "/api/v1/runs/short", member)
    assert (short["state"], short["tasks"][0]["machine"]) == ("Running", "h-02")
    _, endless = await c.call("GET", "/api/v1/runs/endless", member)
    assert (endless["state"], endless["tasks"][0]["machine"]) == ("Running", "h-01")
    _, held = await c.call("GET", "/api/v1/runs/endless-h02", member)
    assert (held["state"], held["reason"]) == ("Pending", "Queued behind big")
    # h-02's runs reach their limits (the agent stops them there): big starts there.
    c.clock.advance(HOUR)
    await _stopped_at_limits(c, "h-02", "short-0", "filler-h-02-0")
    assert c.clock.now() <= ends
    await c.run_pass()
    _, big = await c.call("GET", "/api/v1/runs/big", member)
    assert (big["state"], big["tasks"][0]["machine"]) == ("Running", "h-02")


async def test_a_gang_head_holds_the_machines_that_free_up_first(cluster: Cluster) -> None:
    """Of four machines, h-02 frees in an hour and h-04 in two, h-01 and h-03 in 7 days: a
    16-GPU run (2 machines x 8 GPUs) holds h-02 and h-04 and expects to start in two hours,
    when both have freed up, and starts there then. An 8-GPU run without a time limit takes
    the room beside the 7-day runs, never the held machines'."""
    c = cluster
    member = await c.workspace("vision", max_priority=10)
    await _busy(c, {"h-01": 7 * DAY, "h-02": HOUR, "h-03": 7 * DAY, "h-04": 2 * HOUR})
    ends = c.clock.now() + timedelta(seconds=2 * HOUR)
    await c.submit("vision", "big", gpus=16, priority=10, requested_resources={"machines": 2})
    await c.submit("vision", "endless", gpus=8)
    assert (await c.run_pass()).placed == 1
    _, endless = await c.call("GET", "/api/v1/runs/endless", member)
    assert sorted(task["machine"] for task in endless["tasks"]) == ["h-01", "h-03"]
    _, big = await c.call("GET", "/api/v1/runs/big", member)
    assert big["reason"].startswith(
        f"Next to run, expected to start by {_by(ends)} when runs on h-02, h-04 reach their"
        " time limits: "
    )
    c.clock.advance(2 * HOUR)
    for name in ("h-02", "h-04"):
        await _stopped_at_limits(c, name, f"filler-{name}-0")
    assert c.clock.now() <= ends
    assert (await c.run_pass()).placed == 1
    _, big = await c.call("GET", "/api/v1/runs/big", member)
    assert big["state"] == "Running"
    assert sorted({task["machine"] for task in big["tasks"]}) == ["h-02", "h-04"]


async def test_a_head_whose_every_choice_has_a_task_without_a_limit_holds_as_before(
    cluster: Cluster,
) -> None:
    """Both machines run a task without a time limit: neither frees up by limit, so big (8 GPUs
    on one machine) holds
    the machine an idle cluster would give it and names no expected start."""
    c = cluster
    member = await c.workspace("vision", max_priority=10)
    for name in ("h-01", "h-02"):
        await c.report(name)
        await c.submit(
            "vision",
            f"filler-{name}",
            gpus=4,
            requested_resources={"node_selection": {"names": [name]}},
        )
    assert (await c.run_pass()).placed == 2
    for name in ("h-01", "h-02"):
        await c.report(name, [{"task": f"filler-{name}-0", "state": "Running"}])
    await c.submit("vision", "big", gpus=8, priority=10, requested_resources={"machines": 1})
    await c.submit("vision", "short", gpus=2, time_limit_seconds=600)
    assert (await c.run_pass()).placed == 1
    _, big = await c.call("GET", "/api/v1/runs/big", member)
    assert big["reason"] == "Next to run: No machine fits: 2 of 2 machines ready"
    _, short = await c.call("GET", "/api/v1/runs/short", member)
    assert short["state"] == "Running"


async def test_a_second_run_of_the_same_pool_holds_nothing(cluster: Cluster) -> None:
    """Which runs are heads is decided by the machines they would use if idle: big2, behind
    big and asking the same on the same machines, holds nothing (h-03, which frees up next,
    stays open), and waits with its own reason; a run without a time limit starts on h-03."""
    c = cluster
    member = await c.workspace("vision", max_priority=10)
    await _busy(c, {"h-01": 7 * DAY, "h-02": HOUR, "h-03": 2 * HOUR})
    one = {"machines": 1}
    await c.submit("vision", "big", gpus=8, priority=10, requested_resources=one)
    await c.submit("vision", "big2", gpus=8, priority=10, requested_resources=one)
    on_h03 = {"node_selection": {"names": ["h-03"]}}
    await c.submit("vision", "endless", gpus=2, requested_resources=on_h03)
    assert (await c.run_pass()).placed == 1
    _, big = await c.call("GET", "/api/v1/runs/big", member)
    assert "when runs on h-02 reach their time limits" in big["reason"]
    _, big2 = await c.call("GET", "/api/v1/runs/big2", member)
    assert (big2["reason_kind"], big2["reason"]) == (
        "NoMachineFits",
        "No machine fits: 3 of 3 machines ready",
    )
    _, endless = await c.call("GET", "/api/v1/runs/endless", member)
    assert (endless["state"], endless["tasks"][0]["machine"]) == ("Running", "h-03")


async def test_a_gang_head_finds_the_earliest_machines_among_many(cluster: Cluster) -> None:
    """Ten machines free up at ten different moments, in no order by name; a 24-GPU run (3
    machines x 8 GPUs) holds the three that free up first (h-07, h-03, h-09: the search steps
    past them and halves back) and expects to start when the third of them frees up; the run
    behind it makes it the head."""
    c = cluster
    member = await c.workspace("vision", max_priority=10)
    hours = {"h-01": 90, "h-02": 40, "h-03": 3, "h-04": 70, "h-05": 20}
    hours |= {"h-06": 60, "h-07": 2, "h-08": 50, "h-09": 5, "h-10": 30}
    await _busy(c, {name: h * HOUR for name, h in hours.items()})
    ends = c.clock.now() + timedelta(seconds=5 * HOUR)
    await c.submit("vision", "big", gpus=24, priority=10, requested_resources={"machines": 3})
    await c.submit("vision", "next", gpus=8)
    await c.run_pass()
    _, big = await c.call("GET", "/api/v1/runs/big", member)
    assert big["reason"].startswith(
        f"Next to run, expected to start by {_by(ends)} when runs on h-03, h-07, h-09 reach"
        " their time limits: "
    )
