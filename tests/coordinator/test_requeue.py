"""Requeue after a fault (issue 28.5), with the real placement engine: a run with `retries`
whose worker ends by a GPU fault or with its Lost machine is placed again from the start,
elsewhere, with `ASTRAEUS_RESTART_COUNT`; a worker failing by itself is retried only with
`retry_on_failure`; a cancelled run never; when attempts run out the run fails as before."""

from __future__ import annotations

from typing import Any

import pytest

from astraeus.coordinator.store.queue import read_queue
from astraeus.shared.fake_gpu import gpu_uuid

from .conftest import Cluster
from .fakes import START
from .test_concurrency import assert_no_gpu_held_twice

FAULT = "GPU 0 ({uuid}) faulted: Xid 79: GPU has fallen off the bus"


async def _get(c: Cluster, run: str = "finetune") -> Any:
    status, view = await c.call("GET", f"/api/v1/runs/{run}", c.tokens["vision"])
    assert status == 200, view
    return view


async def _two_machines(c: Cluster, **spec: Any) -> None:
    """gpu-01 and gpu-02 with one GPU each; `finetune` (1 GPU) placed and Running on gpu-01."""
    await c.workspace("vision")
    await c.report("gpu-01", gpus=1)
    await c.report("gpu-02", gpus=1)
    await c.submit("vision", "finetune", gpus=1, **spec)
    assert (await c.run_pass()).placed == 1
    assert (await _get(c))["tasks"][0]["machine"] == "gpu-01"
    await c.report(
        "gpu-01", [{"task": "finetune-0", "state": "Running"}], tasks=["finetune-0"], gpus=1
    )


async def _xid_kills_worker(c: Cluster, machine: str = "gpu-01") -> None:
    """The machine reports its GPU 0 faulted and, in the same report, the worker's crash."""
    await c.report(
        machine,
        [
            {
                "task": "finetune-0",
                "state": "Failed",
                "exit_code": 1,
                "message": "exited with code 1",
            }
        ],
        tasks=[],
        gpus=1,
        faulted=(0,),
    )


def _restart_count(reply: dict[str, Any], task: str = "finetune-0") -> int:
    (assignment,) = [a for a in reply["assignments"] if a["task"] == task]
    return int(assignment["restart_count"])


async def test_a_fatal_xid_mid_run_requeues_the_run_on_another_gpu(cluster: Cluster) -> None:
    """A worker that crashes while its GPU reports a fatal Xid does not fail a run with
    retries 1: the run waits again (`Requeued after a fault (attempt 2 of 2)`), keeps its
    submission time, is placed on the other machine (the faulted GPU is never given again)
    with restart count 1, and succeeds; its attempts say what happened."""
    c = cluster
    await _two_machines(c, retries=1)
    submitted = (await _get(c))["submitted_at"]
    await _xid_kills_worker(c)
    run = await _get(c)
    fault = FAULT.format(uuid=gpu_uuid("gpu-01", 0))
    assert (run["state"], run["reason_kind"], run["attempt"]) == ("Pending", "Requeued", 2)
    assert run["reason"] == "Requeued after a fault (attempt 2 of 2)"
    assert run["submitted_at"] == submitted
    assert [(t["name"], t["state"], t["reason_kind"]) for t in run["tasks"]] == [
        ("finetune-0", "Pending", "Requeued")
    ]
    first, second = run["attempts"]
    assert first["number"] == 1
    assert first["reason"] == f"finetune-0 Failed (exit 1): exited with code 1; {fault}"
    assert (second["number"], second["started_at"], second["ended_at"]) == (2, None, None)

    assert (await c.run_pass()).placed == 1
    run = await _get(c)
    assert (run["state"], run["tasks"][0]["machine"]) == ("Running", "gpu-02")
    reply = await c.report("gpu-02", gpus=1)
    assert _restart_count(reply) == 1
    await c.report(
        "gpu-02", [{"task": "finetune-0", "state": "Running"}], tasks=["finetune-0"], gpus=1
    )
    await c.report("gpu-02", [{"task": "finetune-0", "state": "Succeeded", "exit_code": 0}])
    run = await _get(c)
    assert (run["state"], run["reason"], run["attempt"]) == ("Succeeded", None, 2)
    assert [a["number"] for a in run["attempts"]] == [1, 2]
    assert run["attempts"][1]["ended_at"] is not None
    assert run["attempts"][1]["reason"] is None


async def test_a_requeued_run_waits_since_its_requeue_for_the_latency_metric(
    cluster: Cluster,
) -> None:
    """The placement latency of a requeued run counts from its requeue, not its submission
    (its place in the queue keeps the submission)."""
    c = cluster
    await _two_machines(c, retries=1)
    c.clock.advance(3600)
    await _xid_kills_worker(c)
    (row,) = read_queue(c.store.database)
    assert row.submitted_at == c.clock.now()
    assert (await _get(c))["submitted_at"] == START.isoformat()


async def test_without_retries_a_fault_fails_the_run_as_before(cluster: Cluster) -> None:
    """Retries 0 (the default): the same fault fails the run, with the fault in its reason."""
    c = cluster
    await _two_machines(c)
    await _xid_kills_worker(c)
    run = await _get(c)
    fault = FAULT.format(uuid=gpu_uuid("gpu-01", 0))
    assert (run["state"], run["attempt"]) == ("Failed", 1)
    assert run["reason"] == f"finetune-0 Failed (exit 1): exited with code 1; {fault}"
    assert (await c.run_pass()).placed == 0


async def test_a_worker_failing_by_itself_is_not_retried(cluster: Cluster) -> None:
    """A non-zero exit on a healthy GPU fails a run with retries 3 but no
    `retry_on_failure`."""
    c = cluster
    await _two_machines(c, retries=3)
    await c.report("gpu-01", [{"task": "finetune-0", "state": "Failed", "exit_code": 2}], gpus=1)
    run = await _get(c)
    assert (run["state"], run["reason"], run["attempt"]) == (
        "Failed",
        "finetune-0 Failed (exit 2)",
        1,
    )


async def test_retry_on_failure_retries_until_attempts_run_out(cluster: Cluster) -> None:
    """With `retry_on_failure`, a non-zero exit requeues the run (here on the same healthy
    GPU, restart count 1); the second failure, with no attempt left, fails it with its last
    reason, and both attempts are listed."""
    c = cluster
    await _two_machines(c, retries=1, retry_on_failure=True)
    await c.report("gpu-01", [{"task": "finetune-0", "state": "Failed", "exit_code": 3}], gpus=1)
    run = await _get(c)
    assert (run["state"], run["reason_kind"]) == ("Pending", "Requeued")
    assert (await c.run_pass()).placed == 1
    reply = await c.report("gpu-01", gpus=1)
    assert _restart_count(reply) == 1
    await c.report(
        "gpu-01", [{"task": "finetune-0", "state": "Running"}], tasks=["finetune-0"], gpus=1
    )
    await c.report("gpu-01", [{"task": "finetune-0", "state": "Failed", "exit_code": 4}], gpus=1)
    run = await _get(c)
    assert (run["state"], run["reason"], run["attempt"]) == (
        "Failed",
        "finetune-0 Failed (exit 4)",
        2,
    )
    assert [(a["number"], a["reason"]) for a in run["attempts"]] == [
        (1, "finetune-0 Failed (exit 3)"),
        (2, "finetune-0 Failed (exit 4)"),
    ]


async def test_a_worker_stopped_at_its_time_limit_is_not_retried(cluster: Cluster) -> None:
    """A worker that ran its whole time limit and was stopped by it did not fail by itself:
    even with `retry_on_failure` the run fails."""
    c = cluster
    await _two_machines(c, retries=2, retry_on_failure=True, time_limit_seconds=60)
    c.clock.advance(61)
    stopped = "time limit of 60 s reached; terminated"
    await c.report(
        "gpu-01",
        [{"task": "finetune-0", "state": "Failed", "signal": 15, "message": stopped}],
        gpus=1,
    )
    run = await _get(c)
    assert (run["state"], run["attempt"]) == ("Failed", 1)


async def test_a_cancelled_run_is_never_retried(cluster: Cluster) -> None:
    """A user's cancel ends the run Cancelled, and its worker's end changes nothing."""
    c = cluster
    await _two_machines(c, retries=3, retry_on_failure=True)
    status, _ = await c.call("POST", "/api/v1/runs/finetune/cancel", c.tokens["vision"])
    assert status == 200
    await c.report("gpu-01", [{"task": "finetune-0", "state": "Cancelled", "signal": 15}], gpus=1)
    run = await _get(c)
    assert (run["state"], run["attempt"]) == ("Cancelled", 1)
    assert (await c.run_pass()).placed == 0


async def test_a_lost_machine_requeues_the_run_and_keeps_its_gpus_held(cluster: Cluster) -> None:
    """A worker Lost with its silent machine requeues the run: it starts on the other machine
    with restart count 1, while the Lost worker's GPU stays held until its agent, back,
    reports no such worker; then that GPU is free again and no GPU is ever held twice."""
    c = cluster
    await _two_machines(c, retries=1)
    c.clock.advance(150)
    await c.report("gpu-02", gpus=1)
    c.clock.advance(151)
    await c.report("gpu-02", gpus=1)
    assert (await c.run_pass()).lost == 1
    run = await _get(c)
    assert (run["state"], run["attempt"]) == ("Running", 2)
    assert run["tasks"][0]["machine"] == "gpu-02"
    assert run["attempts"][0]["reason"].startswith("finetune-0 Lost: machine gpu-01 stopped")
    assert_no_gpu_held_twice(c.store)
    _, gpu_01 = await c.call("GET", "/api/v1/machines/gpu-01")
    assert gpu_01["gpus_free"] == 0  # the Lost worker may still run there
    await c.report("gpu-01", gpus=1, tasks=[])  # back, without the worker
    _, gpu_01 = await c.call("GET", "/api/v1/machines/gpu-01")
    assert gpu_01["gpus_free"] == 1
    reply = await c.report("gpu-02", gpus=1)
    assert _restart_count(reply) == 1
    assert_no_gpu_held_twice(c.store)


async def test_a_gang_restarts_whole_once_its_other_workers_are_gone(cluster: Cluster) -> None:
    """Worker 1 of a two-machine run crashes on a faulted GPU: worker 0 is told to stop, and
    the run stays Running (its GPU held) until worker 0's agent reports it gone; then both
    workers are placed again, avoiding the faulted GPU, with restart count 1."""
    c = cluster
    await c.workspace("vision")
    for name in ("gpu-01", "gpu-02", "gpu-03"):
        await c.report(name, gpus=1)
    ask = {"gpu_requests": {"count": 2}, "machines": 2}
    await c.submit("vision", "finetune", gpus=0, requested_resources=ask, retries=2)
    assert (await c.run_pass()).placed == 1
    run = await _get(c)
    where = {task["name"]: task["machine"] for task in run["tasks"]}
    first, second = where["finetune-0"], where["finetune-1"]
    await c.report(
        first, [{"task": "finetune-0", "state": "Running"}], tasks=["finetune-0"], gpus=1
    )
    await c.report(
        second, [{"task": "finetune-1", "state": "Running"}], tasks=["finetune-1"], gpus=1
    )
    await c.report(
        second,
        [{"task": "finetune-1", "state": "Failed", "exit_code": 1}],
        tasks=[],
        gpus=1,
        faulted=(0,),
    )
    run = await _get(c)
    assert (run["state"], run["attempt"]) == ("Running", 1)
    reply = await c.report(first, gpus=1, tasks=["finetune-0"])
    assert [a["cancel"] for a in reply["assignments"]] == [True]
    assert (await c.run_pass()).placed == 0
    await c.report(first, [{"task": "finetune-0", "state": "Cancelled", "signal": 15}], gpus=1)
    run = await _get(c)
    assert (run["state"], run["reason_kind"], run["attempt"]) == ("Pending", "Requeued", 2)
    assert (await c.run_pass()).placed == 1
    run = await _get(c)
    assert [t["name"] for t in run["tasks"]] == ["finetune-0", "finetune-1"]
    machines = {t["machine"] for t in run["tasks"]}
    assert second not in machines
    assert len(machines) == 2
    lead, other = (task["machine"] for task in run["tasks"])
    assert _restart_count(await c.report(lead, gpus=1)) == 1
    await c.report(lead, [{"task": "finetune-0", "state": "Running"}], tasks=["finetune-0"], gpus=1)
    assert _restart_count(await c.report(other, gpus=1), "finetune-1") == 1
    assert_no_gpu_held_twice(c.store)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (-1, "must be at least 0, got -1"),
        (11, "must be at most 10, got 11"),
        ("three", "valid integer"),
        (1.5, "valid integer"),
        (True, "valid integer"),
    ],
    ids=["negative", "above-10", "text", "fraction", "boolean"],
)
async def test_bad_retries_are_refused_naming_the_field(
    cluster: Cluster, value: Any, problem: str
) -> None:
    """`retries` outside 0..10, or not a whole number, is a 400 naming `retries`."""
    c = cluster
    token = await c.workspace("vision")
    spec = {"name": "finetune", "command": ["python"], "retries": value}
    status, body = await c.call("POST", "/api/v1/runs", token, spec)
    assert status == 400, body
    (error,) = body["fields"]
    assert error["field"] == "retries"
    assert problem in error["problem"]


async def test_retries_on_an_array_are_refused(cluster: Cluster) -> None:
    """An array's elements are not retried: `retries` with `array` is a 400 naming
    `retries`."""
    c = cluster
    token = await c.workspace("vision")
    spec = {
        "name": "sweep",
        "command": ["python"],
        "retries": 1,
        "requested_resources": {"array": {"size": 4}},
    }
    status, body = await c.call("POST", "/api/v1/runs", token, spec)
    assert status == 400, body
    assert body["fields"] == [
        {
            "field": "retries",
            "problem": "an array's elements are not retried: give 0, or leave out"
            " requested_resources.array",
        }
    ]


async def test_an_earlier_attempts_log_is_kept_and_read_by_its_number(cluster: Cluster) -> None:
    """After a requeue, a task's log is the attempt's now; `?attempt=1` reads the first
    attempt's (where the crash is); an attempt the run never had is 404, a bad one a 400
    naming `attempt`."""
    c = cluster
    await _two_machines(c, retries=1)
    crash = "step 1200\nCUDA error: unspecified launch failure\n"
    await c.report("gpu-01", logs=[{"task": "finetune-0", "offset": 0, "data": crash}], gpus=1)
    await _xid_kills_worker(c)
    await c.run_pass()
    running = [{"task": "finetune-0", "state": "Running"}]
    await c.report("gpu-02", running, tasks=["finetune-0"], gpus=1)
    resumed = "resuming from step 1000\n"
    await c.report("gpu-02", logs=[{"task": "finetune-0", "offset": 0, "data": resumed}], gpus=1)
    token, path = c.tokens["vision"], "/api/v1/tasks/finetune-0/logs"
    assert (await c.call("GET", path, token))[1]["data"] == resumed
    assert (await c.call("GET", f"{path}?attempt=2", token))[1]["data"] == resumed
    assert (await c.call("GET", f"{path}?attempt=1", token))[1]["data"] == crash
    assert (await c.call("GET", f"{path}?attempt=3", token))[0] == 404
    status, body = await c.call("GET", f"{path}?attempt=0", token)
    assert status == 400
    problem = "must be a whole number from 1 to 11, got '0'"
    assert body["fields"] == [{"field": "attempt", "problem": problem}]
    assert [a["workers"] for a in (await _get(c))["attempts"]] == [1, 1]
