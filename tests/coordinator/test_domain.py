"""The domain's rules on their own: the task state machine and the rendezvous, no store."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from astraeus.coordinator.domain.lifecycle import (
    Move,
    WorkerEnd,
    ends_lost_without_worker,
    gpu_fault,
    late_end_note,
    move,
    requeues,
    run_state,
    stops_the_rest,
)
from astraeus.coordinator.domain.rendezvous import Worker, meeting_port, rendezvous
from astraeus.shared import Rendezvous, RunState, TaskState, TaskUpdate

S = TaskState


@pytest.mark.parametrize(
    ("current", "held", "update", "expected"),
    [
        (S.ASSIGNED, False, S.STARTING, Move.FORWARD),
        (S.ASSIGNED, False, S.RUNNING, Move.FORWARD),
        (S.STARTING, False, S.RUNNING, Move.FORWARD),
        (S.RUNNING, False, S.STARTING, Move.IGNORE),
        (S.STARTING, False, S.STARTING, Move.IGNORE),
        (S.RUNNING, False, S.SUCCEEDED, Move.END),
        (S.ASSIGNED, False, S.FAILED, Move.END),
        (S.LOST, True, S.FAILED, Move.RELEASE),
        (S.LOST, False, S.FAILED, Move.IGNORE),
        (S.LOST, True, S.RUNNING, Move.IGNORE),
        (S.CANCELLED, False, S.RUNNING, Move.IGNORE),
        (S.SUCCEEDED, False, S.FAILED, Move.IGNORE),
    ],
)
def test_an_update_moves_a_task_only_forward_or_to_its_end(
    current: TaskState, held: bool, update: TaskState, expected: Move
) -> None:
    """An agent moves a live task forward or ends it; an ended task stays ended, but a Lost
    one still holding GPUs gives them back when its worker's end is reported."""
    assert move(current, held, update) is expected


def test_only_a_started_task_ends_lost_without_its_worker() -> None:
    """A reply ends Lost only Starting and Running tasks the agent runs no worker for."""
    assert [s.value for s in TaskState if ends_lost_without_worker(s)] == ["Starting", "Running"]


def test_a_late_end_is_noted_with_its_time_and_message() -> None:
    """A Lost task's message gains when its worker ended, and how (or the state)."""
    at = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
    update = TaskUpdate(
        seq=1, task_uid="0" * 8 + "-0000-0000-0000-" + "0" * 12, state=TaskState.FAILED, at=at
    )
    assert late_end_note(update) == "; its worker ended at 2026-10-01T09:00:00+00:00 (Failed)"


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        ((S.PENDING, S.PENDING), None),
        ((S.ASSIGNED, S.PENDING), RunState.RUNNING),
        ((S.SUCCEEDED, S.PENDING), RunState.RUNNING),
        ((S.SUCCEEDED, S.SUCCEEDED), RunState.SUCCEEDED),
        ((S.SUCCEEDED, S.CANCELLED), RunState.FAILED),
        ((S.LOST, S.SUCCEEDED), RunState.FAILED),
    ],
)
def test_a_runs_state_follows_its_tasks(
    states: tuple[TaskState, ...], expected: RunState | None
) -> None:
    """All Pending: unchanged; any started or ended: Running; all ended: Succeeded only when
    every task succeeded, else Failed."""
    assert run_state(states) == expected


def test_a_failed_worker_stops_its_gang_but_not_an_arrays_elements() -> None:
    """One Failed or Lost worker tells a gang's others to stop; array elements go on."""
    assert stops_the_rest((S.RUNNING, S.LOST), is_array=False) is True
    assert stops_the_rest((S.RUNNING, S.FAILED), is_array=True) is False
    assert stops_the_rest((S.RUNNING, S.CANCELLED), is_array=False) is False


def _address(machine: str | None) -> str:
    return f"{machine}.example"


def test_a_gang_meets_at_worker_zeros_port_once_it_started() -> None:
    """Other workers wait while worker 0 is Assigned; then each gets its ranks on its machine."""
    lead = Worker(0, "a", S.ASSIGNED, 29501)
    gang = [lead, Worker(1, "a", S.ASSIGNED, None), Worker(2, "b", S.ASSIGNED, None)]
    assert rendezvous(7, gang[2], gang, _address) is None
    started = [Worker(0, "a", S.STARTING, 29501), *gang[1:]]
    assert rendezvous(7, gang[2], started, _address) == Rendezvous(
        master_addr="a.example",
        master_port=29501,
        world_size=3,
        rank=2,
        node_rank=1,
        local_world_size=1,
        local_rank=0,
    )


def test_worker_zero_waits_for_a_port_and_an_old_one_keeps_its_legacy_port() -> None:
    """An Assigned worker 0 of several has no rendezvous until given a port; one started
    before ports were held meets at 29500 + (run number mod 1000)."""
    pair = [Worker(0, "a", S.ASSIGNED, None), Worker(1, "a", S.ASSIGNED, None)]
    assert rendezvous(3, pair[0], pair, _address) is None
    assert meeting_port(1042, Worker(0, "a", S.RUNNING, None)) == 29542


@pytest.mark.parametrize("workers", [None, 1], ids=["array-element", "one-worker-run"])
def test_a_world_of_one_starts_at_once_without_a_port(workers: int | None) -> None:
    """A one-worker run or an array element holds no port: its rendezvous names none (its
    agent finds one of its own) and it may start at once."""
    alone = Worker(0, "a", S.ASSIGNED, None)
    assert rendezvous(3, alone, None if workers is None else [alone], _address) == Rendezvous(
        master_addr="a.example",
        master_port=None,
        world_size=1,
        rank=0,
        node_rank=0,
        local_world_size=1,
    )


FAULTED = {"GPU-b": "GPU 1 (GPU-b) faulted: Xid 79"}


@pytest.mark.parametrize(
    ("state", "gpus", "expected"),
    [
        (S.FAILED, ["GPU-a", "GPU-b"], "GPU 1 (GPU-b) faulted: Xid 79"),
        (S.LOST, ["GPU-b"], "GPU 1 (GPU-b) faulted: Xid 79"),
        (S.FAILED, ["GPU-a"], None),
        (S.SUCCEEDED, ["GPU-b"], None),
        (S.CANCELLED, ["GPU-b"], None),
    ],
    ids=["failed-on-faulted", "lost-on-faulted", "failed-elsewhere", "succeeded", "cancelled"],
)
def test_a_worker_ends_by_a_gpu_fault_only_when_it_failed_on_a_faulted_gpu(
    state: TaskState, gpus: list[str], expected: str | None
) -> None:
    """The fault is the worker's when it failed or was lost holding a GPU reported faulted."""
    assert gpu_fault(state, gpus, FAULTED) == expected


@pytest.mark.parametrize(
    ("ends", "attempt", "retries", "on_failure", "expected"),
    [
        ([WorkerEnd(S.FAILED, gpu_fault=True), WorkerEnd(S.CANCELLED)], 1, 1, False, True),
        ([WorkerEnd(S.LOST)], 1, 1, False, True),
        ([WorkerEnd(S.LOST)], 2, 1, False, False),
        ([WorkerEnd(S.LOST)], 1, 0, False, False),
        ([WorkerEnd(S.FAILED)], 1, 3, False, False),
        ([WorkerEnd(S.FAILED)], 1, 3, True, True),
        ([WorkerEnd(S.FAILED, timed_out=True)], 1, 3, True, False),
        ([WorkerEnd(S.CANCELLED), WorkerEnd(S.SUCCEEDED)], 1, 3, True, False),
    ],
    ids=[
        "gpu-fault",
        "lost",
        "attempts-used-up",
        "no-retries",
        "failure-not-retried",
        "failure-retried-on-failure",
        "time-limit-is-no-failure",
        "nothing-failed",
    ],
)
def test_which_failed_attempts_are_requeued(
    ends: list[WorkerEnd], attempt: int, retries: int, on_failure: bool, expected: bool
) -> None:
    """A fault (a GPU fault or a Lost worker) requeues while attempts remain; a worker's own
    failure only with `retry_on_failure`, and never one stopped at its time limit."""
    found = requeues(ends, attempt=attempt, retries=retries, retry_on_failure=on_failure)
    assert found is expected
