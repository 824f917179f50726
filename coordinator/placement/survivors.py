"""What keeps out machines that pass every filter when the whole run still does not fit: the
topology filter's verdict on the gang, against where its other workers would be."""

from __future__ import annotations

from collections import defaultdict

from astraeus.shared import Interconnect, Spread, reasons
from astraeus.shared.reasons import RejectionCode

from . import group_classes
from .evaluation import RunEvaluation
from .explanation import Survivor
from .filters import topology
from .rejection import Rejection
from .shape import ShapeOption


def gang_rejection(
    evaluation: RunEvaluation,
    could_fit: bool,
    shape: ShapeOption | None = None,
    idle: RunEvaluation | None = None,
) -> Survivor:
    """The same text for every survivor; `could_fit` (the run fits an idle cluster) makes it a
    room reason, with each machine's own free room as its share of the need. `shape` is the
    shape to tell the shortfall of (default: the fewest workers of the evaluation's worker). A
    run that needs an NVLink domain tells the machines of a domain without IMEX so
    (`_without_imex`)."""
    text, code, need = _text(evaluation, shape)
    imex = topology.wants_domain(evaluation.needs)
    # Rejections are frozen: machines with as much room free share one (there may be 50,000).
    made: dict[float, Rejection] = {}

    def survivor(i: int) -> Rejection:
        if imex and _without_imex(evaluation, idle or evaluation, i):
            return topology.no_imex()
        have = evaluation.room_free(i) if evaluation.needs.gpus else 1
        found = made.get(have)
        if found is None:
            found = made[have] = Rejection(
                filter=topology.NAME, reason=text, room=could_fit, need=need, have=have, code=code
            )
        return found

    return survivor


def _without_imex(evaluation: RunEvaluation, idle: RunEvaluation, i: int) -> bool:
    """Machine `i` is in an NVLink domain without its IMEX channel, so in no group of several
    machines, and could not take the whole run alone even idle (rung 1 needs no IMEX)."""
    facts = evaluation.cluster.facts[i]
    if not facts.nvlink_domain or facts.imex:
        return False
    if not idle.passes(i):
        return True
    stacks = idle.needs.stacks
    alone = [option for option in idle.options if option.tasks == 1 or stacks]
    return not any(idle.slots(i, option) >= option.tasks for option in alone)


def _text(evaluation: RunEvaluation, shape: ShapeOption | None) -> tuple[str, RejectionCode, float]:
    needs = evaluation.needs
    need = needs.gpus or max((option.tasks for option in evaluation.options), default=1)
    if needs.keep_within is not None:
        return topology.NO_ROOM_WITHIN[needs.keep_within], RejectionCode.NO_ROOM_WITHIN, need
    network = needs.interconnect if needs.interconnect in topology.NO_ROOM_ON else None
    if network is None and needs.asks_rdma:
        network = Interconnect.RDMA
    if network is not None:
        code = (
            RejectionCode.NO_INFINIBAND_ROOM
            if network is Interconnect.INFINIBAND
            else RejectionCode.NO_ROOM_ON_NETWORK
        )
        return topology.NO_ROOM_ON[network], code, need
    text, code = _room_text(evaluation, need, shape or _explained(evaluation))
    return text, code, need


def _room_text(
    evaluation: RunEvaluation, need: int, option: ShapeOption
) -> tuple[str, RejectionCode]:
    """What the machines that pass every filter lack together: GPUs, then machines (workers
    when they may share one), each first checked against one site."""
    gpus: dict[str, int] = defaultdict(int)
    workers: dict[str, int] = defaultdict(int)
    eligible = _eligible(evaluation)
    for site, i, alike in eligible:
        gpus[site] += evaluation.cap(i) * alike if evaluation.needs.gpus else 0
        workers[site] += evaluation.slots(i, option) * alike
    if evaluation.needs.gpus:
        text = _short_of(gpus, need, "GPUs")
        if text is not None:
            return text, RejectionCode.SPANS_SITES
        if sum(gpus.values()) < need:
            machines = sum(alike for _site, _i, alike in eligible)
            text = topology.no_room(need, sum(gpus.values()), machines)
            return text, RejectionCode.WHOLE_RUN_DOES_NOT_FIT
    unit = "workers" if evaluation.needs.stacks else "machines"
    text = _short_of(workers, option.tasks, unit)
    if text is not None:
        return text, RejectionCode.SPANS_SITES
    if sum(workers.values()) < option.tasks:
        text = _few_workers(evaluation, option, sum(workers.values()), eligible)
    else:
        text = _few_domains(evaluation, option)
    return text, RejectionCode.WHOLE_RUN_DOES_NOT_FIT


def _eligible(evaluation: RunEvaluation) -> list[tuple[str, int, int]]:
    """(site, machine, how many machines it stands for) for the machines no filter rejects:
    by class of alike machines (`group_classes.eligible_by_site`), one by one for pinned
    GPUs. Called for runs without `keep_within` only."""
    if evaluation.needs.gpu_requests.ids:
        return eligible_by_machine(evaluation)
    by_site = group_classes.eligible_by_site(evaluation)
    return [(site, one.machine, one.size) for site, alike in by_site.items() for one in alike]


def eligible_by_machine(evaluation: RunEvaluation) -> list[tuple[str, int, int]]:
    """`_eligible` machine by machine: what the classes must add up to (tested)."""
    facts = evaluation.cluster.facts
    return [(facts[i].site, i, 1) for i in evaluation.eligible]


def _explained(evaluation: RunEvaluation) -> ShapeOption:
    """The shape the explanation's worker belongs to: the fewest workers of that size."""
    each = evaluation.smallest.gpus
    sized = [option for option in evaluation.options if option.gpus_each == each]
    return (sized or list(evaluation.options) or [ShapeOption(1, each)])[0]


def _short_of(by_site: dict[str, int], need: int, unit: str) -> str | None:
    """`no single site can hold the whole run; …` when only several sites together could."""
    largest = max(by_site.items(), key=lambda item: (item[1], item[0]), default=("", 0))
    if len(by_site) > 1 and largest[1] < need <= sum(by_site.values()):
        detail = (
            f"the largest, {largest[0] or 'unnamed'}, has room for {largest[1]} of {need} {unit}"
        )
        return reasons.spans_sites(_sites_needed(by_site, need), detail)
    return None


def _few_workers(
    evaluation: RunEvaluation, option: ShapeOption, held: int, eligible: list[tuple[str, int, int]]
) -> str:
    machines = sum(alike for _site, i, alike in eligible if evaluation.slots(i, option))
    if evaluation.needs.stacks:
        return topology.too_few_workers(option.tasks, option.gpus_each, held, machines)
    return topology.too_few_machines(option.tasks, option.gpus_each, machines)


def _few_domains(evaluation: RunEvaluation, option: ShapeOption) -> str:
    """Enough machines, but `topology.spread` wants one worker per rack or fabric and too few
    of them have a machine with room."""
    spread = evaluation.needs.spread or Spread.NODE
    members = evaluation.cluster.members
    domains = {
        members[i].rack if spread is Spread.RACK else members[i].fabric
        for i in evaluation.eligible
        if evaluation.slots(i, option)
    }
    return topology.too_few_domains(spread, option.tasks, option.gpus_each, len(domains))


def _sites_needed(by_site: dict[str, int], need: int) -> int:
    held = 0
    for count, room in enumerate(sorted(by_site.values(), reverse=True), start=1):
        held += room
        if held >= need:
            return count
    return len(by_site)


def too_small(text: str) -> Survivor:
    """Machines that could take their part of the run, when the workspace's machines together
    have fewer GPUs of the kind asked than the run asks for."""
    rejection = Rejection(filter=topology.NAME, reason=text, code=RejectionCode.CLUSTER_TOO_SMALL)

    def survivor(i: int) -> Rejection:
        return rejection

    return survivor


def waiting(text: str) -> Survivor:
    """Machines that could take the run now, while it waits for a tighter rung."""

    def survivor(i: int) -> Rejection:
        return Rejection(
            filter=topology.NAME, reason=text, code=RejectionCode.WAITS_FOR_TIGHTER_RUNG
        )

    return survivor
