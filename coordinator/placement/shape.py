"""The run's shape: how many workers, and how many GPUs each.

GPU runs: every even split the machines could hold (16 GPUs as 1×16, 2×8, 4×4, …), fewest
workers first, narrowed by `machines`, `topology.min_nodes`/`max_nodes`,
`gpu_requests.min_per_machine`, `policy: PerNode` and pinned `ids`. CPU-only runs: one worker
unless `machines`, `node_selection.count` or `node_selection.names` (Exact mode) say otherwise.
An array element is one worker with the run's per-worker ask. In `mode: Any` workers may share a
machine, so `machines` counts workers there, and `keep_within: node` allows several.
"""

from __future__ import annotations

from dataclasses import dataclass

from astraeus.shared import GpuPolicy, KeepWithin, SelectionMode

from .needs import Needs


@dataclass(frozen=True)
class ShapeOption:
    tasks: int
    gpus_each: int


def options(needs: Needs) -> tuple[ShapeOption, ...]:
    """Every shape the run allows, fewest machines first."""
    if needs.gpus == 0:
        return (ShapeOption(cpu_workers(needs), 0),)
    if needs.gpu_requests.ids or needs.array_element:
        return (ShapeOption(1, needs.gpus),)
    return tuple(
        ShapeOption(tasks, needs.gpus // tasks)
        for tasks in _divisors(needs.gpus)
        if _allowed(needs, tasks, needs.gpus // tasks)
    )


def cpu_workers(needs: Needs) -> int:
    ask = needs.ask
    if needs.array_element:
        return 1
    if ask.machines is not None:
        return ask.machines
    selection = ask.node_selection
    if selection is not None and selection.count is not None:
        return selection.count
    if selection is not None and selection.names and selection.mode is SelectionMode.EXACT:
        return len(selection.names)
    return 1


def _allowed(needs: Needs, tasks: int, each: int) -> bool:
    ask, topology = needs.ask, needs.ask.topology
    if ask.machines is not None and tasks != ask.machines:
        return False
    if topology is not None:
        if topology.min_nodes is not None and tasks < topology.min_nodes:
            return False
        if topology.max_nodes is not None and tasks > topology.max_nodes:
            return False
    if needs.keep_within is KeepWithin.NODE and tasks > 1 and not needs.stacks:
        return False
    least = needs.gpu_requests.min_per_machine
    if least is not None and each < least:
        return False
    return not (needs.gpu_requests.policy is GpuPolicy.PER_NODE and each & (each - 1))


def _divisors(count: int) -> list[int]:
    small = [d for d in range(1, int(count**0.5) + 1) if count % d == 0]
    return sorted(set(small) | {count // d for d in small})


def why(tasks: int, gpus_each: int, where: str, machines: int | None = None) -> str:
    """`2 machines × 8 GPUs on InfiniBand fabric ib-0`; `1 worker on cpu-01`. Workers sharing
    machines (`machines` fewer than `tasks`): `4 workers × 4 GPUs on 2 machines over Ethernet`,
    `2 workers × 8 GPUs on gpu-01`."""
    machines = tasks if machines is None else machines
    workers = _count(tasks, "worker")
    shared = f" on {_count(machines, 'machine')}" if 1 < machines < tasks else ""
    if gpus_each == 0:
        return f"{workers}{shared} {where}"
    gpus = _count(gpus_each, "GPU")
    if machines < tasks:
        return f"{workers} × {gpus}{shared} {where}"
    return f"{_count(tasks, 'machine')} × {gpus} {where}"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("s" if number != 1 else "")
