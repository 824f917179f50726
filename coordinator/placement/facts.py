"""Each machine read once per snapshot (`MachineFacts`), and what is free on it now (`Free`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from astraeus.shared import GpuInfo, MachineReport, MachineState, labels

from . import fabrics
from .model import MachineSnapshot, RunKey


@dataclass(frozen=True, slots=True)
class MachineFacts:
    """What a machine is, independent of any run: read once when a session starts. Slotted:
    one is kept per machine in both processes."""

    snapshot: MachineSnapshot
    report: MachineReport | None
    up: bool
    site: str
    """The machine's site; "" when neither the label nor the agent's network says."""
    rack: str | None
    nvlink_domain: str | None
    imex: bool
    """The agent can give a worker IMEX channel 0 (`report.imex.available`): a worker placed
    in a multi-node NVLink domain needs it."""
    gpus: tuple[GpuInfo, ...]
    local_drives: frozenset[str]
    """Drives held here that the agent could read at its last scan."""
    reachable_drives: frozenset[str]
    reported_drives: frozenset[str]
    """Every drive the agent is configured with, reachable or not: such a drive exists."""

    @property
    def name(self) -> str:
        return self.snapshot.name

    @property
    def gpu_by_id(self) -> dict[str, GpuInfo]:
        """Each GPU under its UUID and under its index as a string, for pinned `ids`: made
        when a pinned run looks at the machine, and not kept (16 keys each, a few hundred
        bytes a machine: kept, every machine a pinned run ever looked at would hold one)."""
        return {gpu.uuid: gpu for gpu in self.gpus} | {str(gpu.index): gpu for gpu in self.gpus}


@dataclass(slots=True)
class Free:
    """What is free on one machine during a pass; `PlacementSession.take` shrinks it."""

    gpu_ids: set[str]
    cpu_cores: float
    memory_bytes: int
    workers: tuple[RunKey, ...] = ()
    """The runs with live tasks here at the snapshot (none on an idle machine)."""


def machine_facts(machine: MachineSnapshot) -> MachineFacts:
    report = machine.report
    gpus = tuple(report.gpus) if report else ()
    drives = report.drives if report else []
    site = machine.site or (report.labels.get(labels.SITE, "") if report else "")
    return MachineFacts(
        snapshot=machine,
        report=report,
        up=machine.state is MachineState.UP and report is not None,
        site=site,
        rack=fabrics.rack(report),
        nvlink_domain=fabrics.nvlink_domain(report),
        imex=report is not None and report.imex.available,
        gpus=gpus,
        local_drives=_names(d.name for d in drives if d.local and d.reachable),
        reachable_drives=_names(d.name for d in drives if d.reachable),
        reported_drives=_names(d.name for d in drives),
    )


_NAMES: dict[frozenset[str], frozenset[str]] = {frozenset(): frozenset()}
"""Sets of drive names in use, one object each: alike machines (most have no drive at all)
share one instead of three each. Bounded by the distinct sets reported, as drives are few."""


def _names(names: Iterable[str]) -> frozenset[str]:
    found = frozenset(names)
    return _NAMES.setdefault(found, found) if len(_NAMES) < KEPT_NAME_SETS else found


KEPT_NAME_SETS = 4096
"""At most this many distinct sets of drive names are shared; any more are kept per machine."""


def free_now(
    facts: MachineFacts, machine: MachineSnapshot | None = None, idle: Free | None = None
) -> Free:
    """Free capacity from the coordinator's own ledger of what live tasks hold: `machine`'s
    holdings (the facts' own snapshot by default; a newer one when only holdings changed).
    `idle`, the machine's `free_idle`, is returned itself where nothing is held: most machines
    of an idle cluster keep one `Free` (and one set of GPU ids) instead of two. Sessions copy a
    `Free` before they take from it (`PlacementSession._own`), so sharing one is safe."""
    report, machine = facts.report, machine or facts.snapshot
    if report is None:
        return Free(set(), 0, 0, machine.workers)
    held = machine.used_gpu_ids or machine.used_cpu_cores or machine.used_memory_bytes
    if idle is not None and not held and not machine.workers:
        return idle
    gpu_ids = {gpu.uuid for gpu in facts.gpus} - machine.used_gpu_ids
    return Free(
        gpu_ids,
        max(report.cpu_cores - machine.used_cpu_cores, 0),
        max(report.memory_bytes - machine.used_memory_bytes, 0),
        machine.workers,
    )


def free_idle(facts: MachineFacts) -> Free:
    """Free capacity if no run held anything: what could become free by itself."""
    report = facts.report
    if report is None:
        return Free(set(), 0, 0)
    return Free({gpu.uuid for gpu in facts.gpus}, report.cpu_cores, report.memory_bytes)
