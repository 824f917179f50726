"""When a worker may start, and where its run's workers meet (the rendezvous of its assignment).

Worker 0 of a run (an array element: its own world of one) starts once the scheduler gave it a
port (`scheduler/port_grants.py`); every other worker once worker 0's agent found that port free
and started it, so no worker ever meets at a port that changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from astraeus.shared import Rendezvous, TaskState

LEGACY_BASE_PORT = 29500
"""A task started before ports were held (migration 7) was told 29500 + (run number mod 1000);
its assignment keeps saying so. Every other port is the scheduler's (`scheduler/port_grants.py`)."""


@dataclass(frozen=True, slots=True)
class Worker:
    """One task of a run, as the rendezvous reads it."""

    index: int
    machine: str | None
    state: TaskState
    port: int | None


def rendezvous(
    run_seq: int,
    task: Worker,
    workers: Sequence[Worker] | None,
    address: Callable[[str | None], str],
) -> Rendezvous | None:
    """Where `task` (of run `run_seq`) meets its run's `workers` (all of them, by index; None
    for an array element, its own world of one); None while it may not start yet. `address`
    gives the address a machine's workers are reached at."""
    if workers is None:
        port = meeting_port(run_seq, task)
        if port is None:
            return None
        return Rendezvous(
            master_addr=address(task.machine),
            master_port=port,
            world_size=1,
            rank=0,
            node_rank=0,
            local_world_size=1,
        )
    lead = workers[0]
    port = meeting_port(run_seq, lead)
    if port is None or (task.index != 0 and lead.state is TaskState.ASSIGNED):
        return None
    machines = [w.machine for w in workers]
    here = task.machine
    return Rendezvous(
        master_addr=address(lead.machine),
        master_port=port,
        world_size=len(workers),
        rank=task.index,
        node_rank=list(dict.fromkeys(machines)).index(here),
        local_world_size=sum(1 for m in machines if m == here),
        local_rank=sum(1 for m in machines[: task.index] if m == here),
    )


def meeting_port(run_seq: int, lead: Worker) -> int | None:
    """Worker 0's port; for a worker 0 started before ports were held, what it was told; None
    while an Assigned worker 0 has none yet."""
    if lead.port is not None:
        return lead.port
    if lead.state is TaskState.ASSIGNED:
        return None
    return LEGACY_BASE_PORT + run_seq % 1000
