"""Turn rejections into the pending explanation and its headline. The only place with prose."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from astraeus.shared import MachineState, PendingExplanation, reasons

from .decision import Decision
from .model import Pending
from .rejection import Rejection

Survivor = Callable[[int], Rejection]
"""What keeps out a machine no filter rejects (the whole run did not fit with it)."""


def pending(
    now: Decision,
    idle: Decision,
    survivor: Survivor,
    evaluated_at: datetime,
    wanted: tuple[str, ...] = (),
    patience_remaining: int | None = None,
    waits_for: str | None = None,
    unplannable: Rejection | None = None,
) -> Pending:
    """The explanation; `wanted` empty means no machine could ever take the run, so no machine
    is the closest. `waits_for` is the headline of a run that waits for a tighter rung;
    `unplannable` is every machine's reason when the run's rules leave it no shape at all."""
    facts = now.cluster.facts
    if unplannable is not None:
        rejections = [unplannable] * len(facts)
    else:
        rejections = [now.rejection(i) or survivor(i) for i in range(len(facts))]
    # Plain dicts validated in one call: one model per machine costs more than the decision.
    nodes = [
        {"name": machine.name, "state": _state(machine.up), "reasons": [rejection.reason]}
        for machine, rejection in zip(facts, rejections, strict=True)
    ]
    ready = sum(machine.up for machine in facts)
    explanation = PendingExplanation.model_validate(
        {
            "checked_nodes": len(facts),
            "ready_nodes": ready,
            "down_nodes": len(facts) - ready,
            "closest": _closest(now, idle, rejections) if wanted else None,
            "nodes": nodes,
            "evaluated_at": evaluated_at,
        }
    )
    return Pending(
        headline=waits_for or headline(rejections, ready),
        explanation=explanation,
        patience_remaining_seconds=patience_remaining,
        wanted_machines=wanted,
    )


def _state(up: bool) -> MachineState:
    return MachineState.UP if up else MachineState.DOWN


def headline(rejections: list[Rejection], ready: int) -> str:
    """The one non-room reason every machine gives, else `No machine fits: R of C machines
    ready`."""
    texts = {rejection.reason for rejection in rejections}
    if ready and len(texts) == 1 and not any(rejection.room for rejection in rejections):
        return texts.pop()
    return reasons.no_machine_fits(ready, len(rejections))


def _closest(now: Decision, idle: Decision, rejections: list[Rejection]) -> str | None:
    """The machine short on room alone (it would take the run if idle) with most of its need."""
    best: tuple[float, str] | None = None
    for i, rejection in enumerate(rejections):
        if not rejection.room or not idle.passes(i):
            continue
        rank = (-rejection.have / (rejection.need or 1), now.cluster.facts[i].name)
        if best is None or rank < best:
            best = rank
    return best[1] if best else None
