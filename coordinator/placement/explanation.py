"""Why a run waits: its rejections made into a `Pending`, with the headline, the closest machine
and the machines checked (`pending`).

The words of each machine's reason come from its filter, the queue's from `shared/reasons.py`;
this module only chooses among them and counts. The verdicts are kept as `verdicts.Verdicts`,
which makes the wire forms of the explanation when they are asked for."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from astraeus.shared import reasons
from astraeus.shared.reasons import ReasonKind, RejectionCode

from .evaluation import RunEvaluation
from .filters.selection import in_no_pool
from .model import Pending
from .rejection import Rejection
from .verdicts import Verdicts

Survivor = Callable[[int], Rejection]
"""What keeps out a machine no filter rejects (the whole run did not fit with it)."""
Judge = Callable[[list[int]], list[Rejection | None]]
"""The first filter keeping each of these machines out, or None (`RunEvaluation.rejections`,
or the machines judged each against its own part of the run)."""


def pending(
    current: RunEvaluation,
    idle: RunEvaluation,
    survivor: Survivor,
    evaluated_at: datetime,
    wanted: tuple[str, ...] = (),
    patience_remaining: int | None = None,
    waits_for: str | None = None,
    unplannable: Rejection | None = None,
    *,
    judge: Judge | None = None,
    unheld: RunEvaluation | None = None,
    too_small: str | None = None,
) -> Pending:
    """The explanation; `wanted` empty means no machine could ever take the run, so no machine
    is the closest. `waits_for` is the headline of a run that waits for a tighter rung;
    `unplannable` is every machine's reason when the run's rules leave it no shape at all.
    `judge` finds the machines' rejections (default: `current`'s). `unheld` judges the run
    without machines held for a run ahead: a held machine shows what else keeps it out, and
    `held for a run ahead in the queue` only where nothing does. `too_small` is the headline
    when the workspace's machines together could never hold the run, unless every machine
    gives one other reason, not about room (that reason is the problem).

    Only the machines of the workspace's pools are checked, counted and named: the guide's
    "you never see machines outside them"."""
    facts, names = current.cluster.facts, current.cluster.names
    shown = workspace_machines(current)
    if unplannable is not None:
        rejections = [unplannable] * len(shown)
    else:
        found = (judge or current.rejections)(shown)
        if unheld is not None:
            found = _unheld(found, shown, unheld)
        rejections = [rejection or survivor(i) for i, rejection in zip(shown, found, strict=True)]
    every = len(shown) == len(names)
    # Shown in name order: every machine shown is the cluster's lists as they are.
    up = [one.up for one in facts] if every else [facts[i].up for i in shown]
    closest = _closest(current, idle, shown, rejections) if wanted else None
    checked = list(names) if every else [names[i] for i in shown]
    verdicts = Verdicts(checked, up, rejections, closest, evaluated_at)
    pools = current.needs.run.pools
    if waits_for is not None:
        text, kind = waits_for, ReasonKind.WAITS_FOR_NETWORK
    elif shown or not pools:
        text, kind = headline(rejections, sum(up))
        # The guide's rule first: one reason, not room, on every machine is the problem.
        if too_small is not None and (kind is not ReasonKind.SAME_REASON or text == too_small):
            text, kind = too_small, ReasonKind.CLUSTER_TOO_SMALL
    else:
        text, kind = in_no_pool(pools), ReasonKind.NO_MACHINES
    return Pending(
        headline=text,
        explained=verdicts,
        kind=kind,
        patience_remaining_seconds=patience_remaining,
        wanted_machines=wanted,
    )


def _unheld(
    found: list[Rejection | None], shown: list[int], unheld: RunEvaluation
) -> list[Rejection | None]:
    """Held is about room: a held machine that something else keeps out shows that instead."""
    held = RejectionCode.HELD_FOR_QUEUE
    return [
        (unheld.rejection(i) or rejection)
        if rejection is not None and rejection.code == held
        else rejection
        for i, rejection in zip(shown, found, strict=True)
    ]


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
    return current.workspace


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
