"""Fakes for coordinator tests: a clock moved by hand, machine reports, a first-fit engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from astraeus.coordinator.placement import (
    ClusterSnapshot,
    Pending,
    Placement,
    RunRequest,
    WorkerPlacement,
)
from astraeus.coordinator.placement.filters import accepting, up
from astraeus.coordinator.placement.filters import gpus as gpu_filter
from astraeus.coordinator.placement.rejection import Rejection
from astraeus.coordinator.placement.verdicts import Verdicts
from astraeus.shared import (
    SCHEMA_VERSION,
    Landing,
    MachineState,
    NetworkKind,
    Shape,
    reasons,
)
from astraeus.shared.fake_gpu import gpu_uuid
from astraeus.shared.reasons import RejectionCode

START = datetime(2026, 10, 1, 9, 0, 0, tzinfo=UTC)
XID_79 = {
    "state": "faulted",
    "signals": [{"kind": "xid", "message": "Xid 79: GPU has fallen off the bus"}],
}


def report(
    name: str,
    *,
    gpus: int = 8,
    model: str = "NVIDIA H100 80GB HBM3",
    labels: dict[str, str] | None = None,
    cpu_cores: float = 96,
    memory_bytes: int = 1024**4,
    faulted: tuple[int, ...] = (),
    **extra: Any,
) -> dict[str, Any]:
    """A machine report as an agent sends it, with `gpus` GPUs, healthy but those whose index
    is in `faulted` (a fatal Xid 79); `extra` fields added."""
    return {
        "advertise_address": "127.0.0.1",
        **extra,
        "schema_version": SCHEMA_VERSION,
        "name": name,
        "labels": labels or {},
        "cpu_cores": cpu_cores,
        "memory_bytes": memory_bytes,
        "gpus": [
            {
                "index": i,
                "uuid": gpu_uuid(name, i),
                "vendor": "nvidia",
                "model": model,
                "memory_bytes": 85520809984,
                **({"health": XID_79} if i in faulted else {}),
            }
            for i in range(gpus)
        ],
    }


@dataclass
class FirstFitSession:
    """A stand-in for the placement engine: one worker on the first Up machine, by name, with
    enough free GPUs. Tests of the queue rules use it to control exactly what fits where."""

    snapshot: ClusterSnapshot
    taken: dict[str, set[str]] = field(default_factory=dict)

    def _free(self, machine: str) -> list[str]:
        view = next(m for m in self.snapshot.machines if m.name == machine)
        gpus = [g.uuid for g in view.report.gpus] if view.report else []
        used = view.used_gpu_ids | self.taken.get(machine, set())
        return [g for g in gpus if g not in used]

    def place(
        self, run: RunRequest, now: datetime, *, exclude: frozenset[str] = frozenset()
    ) -> Placement | Pending:
        need = run.ask.gpu_count
        rejections: list[Rejection] = []
        ready = [m for m in self.snapshot.machines if m.state == MachineState.UP]
        for view in self.snapshot.machines:
            free = self._free(view.name)
            if view.state != MachineState.UP:
                rejections.append(
                    Rejection(filter=up.NAME, reason=up.DOWN, code=RejectionCode.MACHINE_DOWN)
                )
            elif view.cordon_reason is not None:
                text = reasons.cordoned(view.cordon_reason)
                rejections.append(
                    Rejection(filter=accepting.NAME, reason=text, code=RejectionCode.CORDONED)
                )
            elif len(free) < need or view.name in exclude:
                text = reasons.insufficient_gpus(need, len(free))
                code = RejectionCode.INSUFFICIENT_GPUS
                room = Rejection(
                    filter=gpu_filter.NAME,
                    reason=text,
                    room=True,
                    need=need,
                    have=len(free),
                    code=code,
                )
                rejections.append(room)
            else:
                worker = WorkerPlacement(0, view.name, tuple(free[:need]), 0, 0)
                return Placement(
                    workers=(worker,),
                    shape=Shape(tasks=1, gpus_each=need, why=f"1 machine × {need} GPUs"),
                    landing=Landing(rung="node", where=view.name, machines=[view.name]),
                    network=NetworkKind.LOCAL,
                )
        closest = next(iter(self.idle_machines(run, now, frozenset())), None)
        views = self.snapshot.machines
        is_up = [view.state == MachineState.UP for view in views]
        explained = Verdicts([view.name for view in views], is_up, rejections, closest, now)
        return Pending(
            headline=reasons.no_machine_fits(len(ready), len(self.snapshot.machines)),
            explained=explained,
            wanted_machines=(closest,) if closest else (),
        )

    def idle_machines(
        self, run: RunRequest, now: datetime, exclude: frozenset[str]
    ) -> tuple[str, ...]:
        """Closest: the first machine, but those excluded, that could hold the run once its
        GPUs free up."""
        need = run.ask.gpu_count
        for v in self.snapshot.machines:
            up = v.state == MachineState.UP and v.cordon_reason is None
            if up and v.name not in exclude and v.report and len(v.report.gpus) >= need:
                return (v.name,)
        return ()

    def take(self, placement: Placement) -> None:
        for worker in placement.workers:
            self.taken.setdefault(worker.machine, set()).update(worker.gpu_ids)
