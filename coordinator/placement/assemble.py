"""Turn the ladder's choice into a `Placement`: workers, shape and why, and where it landed."""

from __future__ import annotations

from collections import Counter

from astraeus.shared import Landing, Shape

from . import ladder, shape
from .evaluation import RunEvaluation
from .gang import Choice
from .model import Placement, WorkerPlacement


def build_placement(evaluation: RunEvaluation, choice: Choice) -> Placement:
    facts = evaluation.cluster.facts
    first = evaluation.cluster.members[choice.machines[0]]
    where, why_tail = ladder.where(choice.rung, first)
    each = choice.option.gpus_each
    ask = evaluation.needs.worker(each)
    gpus = _gpus(evaluation, choice)
    workers = tuple(
        WorkerPlacement(
            index=index,
            machine=facts[i].name,
            gpu_ids=gpu_ids,
            cpu_cores=ask.cpu_cores,
            memory_bytes=ask.memory_bytes,
        )
        for index, (i, gpu_ids) in enumerate(zip(choice.machines, gpus, strict=True))
    )
    tasks = choice.option.tasks
    machines = list(dict.fromkeys(worker.machine for worker in workers))
    return Placement(
        workers=workers,
        shape=Shape(
            tasks=tasks, gpus_each=each, why=shape.why(tasks, each, why_tail, len(machines))
        ),
        landing=Landing(rung=choice.rung.name, where=where, machines=machines),
        network=ladder.network(choice.rung, first),
        nvlink_domain=first.nvlink_domain if choice.rung.nvlink else None,
    )


def _gpus(evaluation: RunEvaluation, choice: Choice) -> list[tuple[str, ...]]:
    """Each worker's GPUs: workers sharing a machine split what it gives them, in order."""
    each = choice.option.gpus_each
    taken = {
        i: evaluation.gpus_for(i, count * each)[0] for i, count in Counter(choice.machines).items()
    }
    seen: Counter[int] = Counter()
    found = []
    for i in choice.machines:
        k = seen[i]
        seen[i] += 1
        found.append(taken[i][k * each : (k + 1) * each])
    return found
