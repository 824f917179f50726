"""A machine's score, term by term: what the console shows when asked why a machine won."""

from __future__ import annotations

from datetime import datetime

from . import scores
from .model import ClusterSnapshot, MachineSnapshot, RunRequest
from .session import PlacementSession


def score_breakdown(
    run: RunRequest,
    machine: MachineSnapshot,
    gpus_taken: int,
    *,
    now: datetime,
    snapshot: ClusterSnapshot | None = None,
    rdma_work: bool = False,
) -> list[tuple[str, int]]:
    """Every score term's points for one worker of `run` taking `gpus_taken` GPUs on `machine`,
    in the guide's order. `snapshot` (which should hold `machine`) lets drive terms see which
    machines are near; `rdma_work` scores the worker as placed on RDMA."""
    cluster = snapshot if snapshot is not None else ClusterSnapshot(machines=(machine,))
    session = PlacementSession(cluster)
    return scores.breakdown(session.score_input(run, machine.name, gpus_taken, now, rdma_work))
