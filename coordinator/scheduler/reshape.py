"""Reshaping: a run placed but not started moves when a strictly tighter rung is free now.

The guide: "While none of its workers has started, the scheduler may change the shape as the
cluster changes: a 4×4 inside one InfiniBand fabric beats a 2×8 over Ethernet." Pure: no
database, no clock.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from datetime import datetime

from astraeus.coordinator.placement import ClusterSnapshot, MachineSnapshot, Placement
from astraeus.coordinator.placement.ladder import RUNGS
from astraeus.coordinator.store.unstarted import Unstarted
from astraeus.shared.admin import Workspace

from .items import Reshaped, queue_item
from .queue_walk import SessionFactory, request_for

RANK = {rung.name: position for position, rung in enumerate(RUNGS)}
"""Rungs by tightness: 0 is one machine."""


def find_reshape(
    unstarted: Sequence[Unstarted],
    snapshot: ClusterSnapshot,
    now: datetime,
    workspaces: Mapping[str, Workspace],
    session_factory: SessionFactory,
    seconds: float,
) -> Reshaped | None:
    """The first run, in queue order, that the engine now places on a strictly tighter rung
    with its own assignment released; None when none does (or `seconds` ran out).

    One reshape per pass: each look builds a session over a snapshot with that run's holdings
    released, and the pass after a reshape sees the freed capacity."""
    deadline = time.perf_counter() + seconds
    for run in unstarted:
        if time.perf_counter() > deadline:
            return None
        was = RANK.get(run.rung)
        if not was:
            continue  # on one machine already (or a rung this engine does not know)
        session = session_factory(released(snapshot, run))
        request = request_for(queue_item(run.row), workspaces.get(run.row.workspace))
        result = session.place(request, now)
        if not isinstance(result, Placement) or RANK.get(result.landing.rung, was) >= was:
            continue
        if reuses_a_name(run, result):
            continue  # the next pass may find a shape that does not
        return Reshaped(run, result)
    return None


def released(snapshot: ClusterSnapshot, run: Unstarted) -> ClusterSnapshot:
    """The snapshot with the run's own GPUs, cores and memory free, as if it were Pending."""
    by_machine: dict[str, list[int]] = {}
    for position, task in enumerate(run.tasks):
        by_machine.setdefault(task.machine, []).append(position)
    views: list[MachineSnapshot] = []
    for view in snapshot.machines:
        mine = by_machine.get(view.name)
        if mine is None:
            views.append(view)
            continue
        tasks = [run.tasks[p] for p in mine]
        gpus = {gpu for task in tasks for gpu in task.gpu_ids}
        views.append(
            dataclasses.replace(
                view,
                used_gpu_ids=view.used_gpu_ids - gpus,
                used_cpu_cores=view.used_cpu_cores - sum(t.cpu_cores for t in tasks),
                used_memory_bytes=view.used_memory_bytes - sum(t.memory_bytes for t in tasks),
                workers=tuple(w for w in view.workers if w != (run.row.workspace, run.row.run)),
            )
        )
    return dataclasses.replace(snapshot, machines=tuple(views))


def reuses_a_name(run: Unstarted, placement: Placement) -> bool:
    """Whether a worker `<run>-<i>` would go, changed, to the machine that already had it.

    An agent that started the old worker just before the pass would see the same name in its
    reply and keep the old process; a name that moves is stopped there instead. So a name may
    stay on its machine only when the agent would be told exactly the same: the same GPUs,
    cores and memory, network, NVLink domain, number of workers, worker 0's machine, and its
    local rank among the run's workers on the machine."""
    old = {task.index: task for task in run.tasks}
    same_world = (
        len(run.tasks) == len(placement.workers)
        and old.get(0) is not None
        and old[0].machine == placement.workers[0].machine
        and run.network == placement.network.value
        and run.nvlink_domain == placement.nvlink_domain
    )
    old_local = dict(
        zip(
            (task.index for task in run.tasks),
            _local_ranks([task.machine for task in run.tasks]),
            strict=True,
        )
    )
    new_local = _local_ranks([worker.machine for worker in placement.workers])
    for i, worker in enumerate(placement.workers):
        was = old.get(i)
        if was is None or was.machine != worker.machine:
            continue
        same = (
            same_world
            and old_local.get(i) == new_local[i]
            and set(was.gpu_ids) == set(worker.gpu_ids)
            and was.cpu_cores == worker.cpu_cores
            and was.memory_bytes == worker.memory_bytes
        )
        if not same:
            return True
    return False


def _local_ranks(machines: Sequence[str | None]) -> list[tuple[int, int]]:
    """Each worker's (local rank, local world size): its place among the run's workers on its
    machine, as the agent is told."""
    seen: dict[str | None, int] = {}
    ranks = []
    for machine in machines:
        ranks.append(seen.get(machine, 0))
        seen[machine] = ranks[-1] + 1
    return [(rank, seen[machine]) for rank, machine in zip(ranks, machines, strict=True)]
