"""Turn the ladder's choice into a `Placement`: workers, shape and why, and where it landed."""

from __future__ import annotations

from astraeus.shared import Landing, Shape

from . import ladder, shape
from .decision import Decision
from .gang import Choice
from .model import Placement, WorkerPlacement


def placement(decision: Decision, choice: Choice) -> Placement:
    facts = decision.cluster.facts
    first = decision.cluster.members[choice.machines[0]]
    where, why_tail = ladder.where(choice.rung, first)
    each = choice.option.gpus_each
    ask = decision.needs.worker(each)
    workers = tuple(
        WorkerPlacement(
            index=index,
            machine=facts[i].name,
            gpu_ids=decision.gpus_for(i, each)[0],
            cpu_cores=ask.cpu_cores,
            memory_bytes=ask.memory_bytes,
        )
        for index, i in enumerate(choice.machines)
    )
    tasks = choice.option.tasks
    return Placement(
        workers=workers,
        shape=Shape(tasks=tasks, gpus_each=each, why=shape.why(tasks, each, why_tail)),
        landing=Landing(
            rung=choice.rung.name,
            where=where,
            machines=[worker.machine for worker in workers],
        ),
        network=ladder.network(choice.rung, first),
        nvlink_domain=first.nvlink_domain if choice.rung.name == "nvlink_domain" else None,
    )
