"""Why a run waits: its rejections made into a `Pending`, with the headline, the closest machine
and the machines checked (`pending`).

The words of each machine's reason come from its filter, the queue's from `shared/reasons.py`;
this module only chooses among them and counts. The verdicts are kept as `verdicts.Verdicts`,
which makes the wire forms of the explanation when they are asked for."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from astraeus.shared import labels, reasons
from astraeus.shared.reasons import ReasonKind

from .evaluation import RunEvaluation
from .filters.selection import in_no_pool
from .model import Pending
from .rejection import Rejection
from .verdicts import Verdicts

Survivor = Callable[[int], Rejection]
"""What keeps out a machine no filter rejects (the whole run did not fit with it)."""


def pending(
    current: RunEvaluation,
    idle: RunEvaluation,
    survivor: Survivor,
    evaluated_at: datetime,
    wanted: tuple[str, ...] = (),
    patience_remaining: int | None = None,
    waits_for: str | None = None,
    unplannable: Rejection | None = None,
) -> Pending:
    """The explanation; `wanted` empty means no machine could ever take the run, so no machine
    is the closest. `waits_for` is the headline of a run that waits for a tighter rung;
    `unplannable` is every machine's reason when the run's rules leave it no shape at all.

    Only the machines of the workspace's pools are checked, counted and named: the guide's
    "you never see machines outside them"."""
    facts, names = current.cluster.facts, current.cluster.names
    shown = workspace_machines(current)
    if unplannable is not None:
        rejections = [unplannable] * len(shown)
    else:
        found = current.rejections(shown)
        rejections = [rejection or survivor(i) for i, rejection in zip(shown, found, strict=True)]
    up = [facts[i].up for i in shown]
    closest = _closest(current, idle, shown, rejections) if wanted else None
    verdicts = Verdicts([names[i] for i in shown], up, rejections, closest, evaluated_at)
    pools = current.needs.run.pools
    if waits_for is not None:
        text, kind = waits_for, ReasonKind.WAITS_FOR_NETWORK
    elif shown or not pools:
        text, kind = headline(rejections, sum(up))
    else:
        text, kind = in_no_pool(pools), ReasonKind.NO_MACHINES
    return Pending(
        headline=text,
        explained=verdicts,
        kind=kind,
        patience_remaining_seconds=patience_remaining,
        wanted_machines=wanted,
    )


def headline(rejections: list[Rejection], ready: int) -> tuple[str, ReasonKind]:
    """The one non-room reason every machine gives, else `No machine fits: R of C machines
    ready`; with its kind."""
    texts = {rejection.reason for rejection in rejections}
    if ready and len(texts) == 1 and not any(rejection.room for rejection in rejections):
        return texts.pop(), ReasonKind.SAME_REASON
    return reasons.no_machine_fits(ready, len(rejections)), ReasonKind.NO_MACHINE_FITS


def workspace_machines(current: RunEvaluation) -> list[int]:
    """The machines (indices, in name order) of the run's workspace's pools; all of them for a
    workspace without pools."""
    pools, facts = current.needs.run.pools, current.cluster.facts
    if not pools:
        return list(range(len(facts)))
    return [i for i, one in enumerate(facts) if one.snapshot.labels.get(labels.POOL) in pools]


def _closest(
    current: RunEvaluation, idle: RunEvaluation, shown: list[int], rejections: list[Rejection]
) -> str | None:
    """The machine short on room alone (it would take the run if idle) with most of its need."""
    best: tuple[float, int] | None = None
    for i, rejection in zip(shown, rejections, strict=True):
        if not rejection.room or not idle.passes(i):
            continue
        # Machines are in name order, so the lower index wins a tie.
        rank = (-rejection.have / (rejection.need or 1), i)
        if best is None or rank < best:
            best = rank
    return current.cluster.names[best[1]] if best else None
