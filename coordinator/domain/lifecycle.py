"""The task state machine: what an agent's update does to a task, decided from the task's state,
and the run's state that follows from its tasks'.

Pending → Assigned (a scheduler pass) → Starting → Running → Succeeded, Failed, Cancelled or
Lost. An agent moves a task only forward; any live task may end. A Lost task whose GPUs are still
held (its machine fell silent, its worker may still run) gives them back when its agent reports
the worker ended or gone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from astraeus.shared import RunState, TaskState, TaskUpdate


class Move(Enum):
    """What the store writes for one update."""

    IGNORE = "ignore"
    """Nothing: a backward or repeated move, or a late word about a task that ended already."""
    FORWARD = "forward"
    """The task takes the update's (live) state."""
    END = "end"
    """The task ends in the update's state; its GPUs, cores and memory return."""
    RELEASE = "release"
    """A Lost task's held GPUs, cores and memory return: its worker is reported ended."""


FORWARD: dict[TaskState, frozenset[TaskState]] = {
    TaskState.ASSIGNED: frozenset({TaskState.STARTING, TaskState.RUNNING}),
    TaskState.STARTING: frozenset({TaskState.RUNNING}),
    TaskState.RUNNING: frozenset(),
}
"""Non-ending moves an agent may make; any live task may also end."""

STARTED = frozenset({TaskState.STARTING, TaskState.RUNNING})
"""States only an agent's own update can bring: its agent must have had the worker."""

NO_WORKER = "the agent on {machine} has no worker for it: how it ended was not recorded"
"""A Starting or Running task its machine's agent says it does not run (its state was lost, or
the database was restored from a backup older than the task's end)."""


FORGOTTEN = "machine {machine} was forgotten by an admin at {at}: it will not come back"
"""A live task on a machine an admin forgot (`astra astraeus machine forget`): it ends Lost and
its GPUs, cores and memory return at once, only because an admin said the machine is gone."""

FORGOTTEN_NOTE = (
    "; machine {machine} was forgotten by an admin at {at}: its GPUs are no longer held"
)
"""Added to a Lost task's message when its GPUs, held while its worker might still run, are
given back because an admin forgot its machine."""


def move(current: TaskState, held: bool, update: TaskState) -> Move:
    """What an agent's update to state `update` does to a task in state `current` (`held`: a
    Lost task whose GPUs are still held)."""
    if not current.holds_resources:
        # Ended already (Lost, or cancelled while Pending): the agent is late. A Lost task's
        # GPUs stay held until its worker is reported gone, which is now.
        return Move.RELEASE if update.ended and held else Move.IGNORE
    if update.ended:
        return Move.END
    return Move.FORWARD if update in FORWARD[current] else Move.IGNORE


def ends_lost_without_worker(state: TaskState) -> bool:
    """Whether a task in `state` ends Lost (`NO_WORKER`) when its agent says it runs no worker
    for it: only a started one (an Assigned task's worker may simply not have started yet)."""
    return state in STARTED


def late_end_note(update: TaskUpdate) -> str:
    """Added to a Lost task's message when its worker's end is reported after all."""
    return f"; its worker ended at {update.at.isoformat()} ({update.message or update.state.value})"


def failed(state: TaskState) -> bool:
    """A task that ended without succeeding and without being cancelled: Failed or Lost."""
    return state in (TaskState.FAILED, TaskState.LOST)


def stops_the_rest(states: Sequence[TaskState], *, is_array: bool) -> bool:
    """Whether a run's other workers are told to stop: a gang cannot go on without a worker
    (like a failed MPI rank), so one failed worker stops the others; an array's elements are
    independent."""
    return not is_array and any(failed(state) for state in states)


def run_state(states: Sequence[TaskState]) -> RunState | None:
    """The run's state from its tasks' states; None while every task is still Pending (the run
    stays as it is)."""
    if all(s.ended for s in states):
        if all(s == TaskState.SUCCEEDED for s in states):
            return RunState.SUCCEEDED
        return RunState.FAILED
    if any(s.holds_resources or s.ended for s in states):
        return RunState.RUNNING
    return None


@dataclass(frozen=True)
class WorkerEnd:
    """How one worker of a run's attempt ended, for `requeues`."""

    state: TaskState
    gpu_fault: bool = False
    """One of its GPUs was reported faulted when its end was (`gpu_fault`)."""
    timed_out: bool = False
    """It ran for its whole time limit: stopped by it, not failed by itself."""


def gpu_fault(state: TaskState, gpu_ids: Sequence[str], faulted: Mapping[str, str]) -> str | None:
    """The fault that ended a worker: it failed (or was lost) while one of its GPUs is reported
    faulted (`faulted`: GPU UUID to the fault in words), as a fatal Xid kills a CUDA process;
    None otherwise. A worker that succeeded or was cancelled did not end by a fault."""
    if not failed(state):
        return None
    for gpu in gpu_ids:
        if gpu in faulted:
            return faulted[gpu]
    return None


def requeues(
    ends: Sequence[WorkerEnd], *, attempt: int, retries: int, retry_on_failure: bool
) -> bool:
    """Whether a run whose attempt `attempt` failed is placed again from the start instead of
    failing: attempts remain (`retries` more than the first), and a worker ended by a fault —
    its GPU faulted while it ran, or it was Lost with its machine — or, with
    `retry_on_failure`, failed by itself (not by reaching its time limit). A run cancelled
    by its user never gets here (it ended already), and a worker ending 0 never failed."""
    if attempt > retries:
        return False
    return any(_retried(end, retry_on_failure) for end in ends)


def requeues_preempted(state: RunState, *, preempting: bool) -> bool:
    """Whether a run told to stop for a higher-priority run goes back to the queue: once every
    worker of its attempt ended (`state`, from its tasks'), however they ended, unless every one
    succeeded first. Its attempt uses up no retry: a preemption is the cluster's doing, not
    the run's, so `requeues` is never asked and `retries` never limits it."""
    return preempting and state is RunState.FAILED


def _retried(end: WorkerEnd, retry_on_failure: bool) -> bool:
    # A preempted worker's end (the third cause the issue names) never gets here: its run goes
    # back to the queue by `requeues_preempted`, before any retry is counted.
    if end.state is TaskState.LOST or (end.gpu_fault and failed(end.state)):
        return True
    return retry_on_failure and end.state is TaskState.FAILED and not end.timed_out
