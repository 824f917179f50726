"""The `gpus` filter: none faulted; of the model, vendor and memory asked; enough free (healthy
ones, with `healthy_only`); pinned ids free."""

from __future__ import annotations

from typing import Final

from astraeus.shared import GpuHealthState, reasons
from astraeus.shared.reasons import RejectionCode

from .. import gpu_match
from ..rejection import Rejection
from .check import Check, Reads

NAME: Final = "gpus"
READS: Final = Reads.FREE


def too_few(need: int, usable: int) -> str:
    """The machine could never give that many, even idle."""
    return f"machine has too few gpus: need {need}, it has {usable} usable"


def no_such_gpu(gpu_id: str) -> str:
    return f"no GPU {gpu_id} on this machine"


def gpu_faulted(gpu_id: str) -> str:
    return f"GPU {gpu_id} is faulted"


def gpu_at_risk(gpu_id: str) -> str:
    return f"GPU {gpu_id} is at risk"


def gpu_in_use(gpu_id: str) -> str:
    return f"GPU {gpu_id} is in use"


def no_model(c: Check) -> str:
    ask = c.needs.gpu_requests
    vendor = ask.vendor.value if ask.vendor else None
    return reasons.no_gpu_model(ask.models, ask.min_memory_gb, vendor)


def check(c: Check) -> Rejection | None:
    need = c.worker.gpus
    if need == 0:
        return None
    if c.needs.gpu_requests.ids:
        return _pinned(c)
    found, healthy_only = c.supply, c.needs.gpu_requests.healthy_only
    if found.usable == 0:
        return Rejection(filter=NAME, reason=no_model(c), code=RejectionCode.NO_GPU_MODEL)
    free = found.free(healthy_only)
    if free >= need:
        return None
    if healthy_only and found.at_risk_free:
        text = reasons.needs_healthy(need, free, found.at_risk_free)
        return Rejection(
            filter=NAME,
            reason=text,
            room=found.healthy >= need,
            need=need,
            have=free,
            code=RejectionCode.NEEDS_HEALTHY_GPUS,
        )
    if found.usable < need or (healthy_only and found.healthy < need):
        usable = found.healthy if healthy_only else found.usable
        return Rejection(filter=NAME, reason=too_few(need, usable), code=RejectionCode.TOO_FEW_GPUS)
    text = reasons.insufficient_gpus(need, free)
    return Rejection(
        filter=NAME,
        reason=text,
        room=True,
        need=need,
        have=free,
        code=RejectionCode.INSUFFICIENT_GPUS,
    )


def _pinned(c: Check) -> Rejection | None:
    for gpu_id in c.needs.gpu_requests.ids:
        gpu = c.facts.gpu_by_id.get(gpu_id)
        if gpu is None:
            return Rejection(
                filter=NAME, reason=no_such_gpu(gpu_id), code=RejectionCode.NO_SUCH_GPU
            )
        if gpu.health.state is GpuHealthState.FAULTED:
            return Rejection(
                filter=NAME, reason=gpu_faulted(gpu_id), code=RejectionCode.GPU_FAULTED
            )
        if not gpu_match.matches(c.needs.gpu_requests, gpu):
            return Rejection(filter=NAME, reason=no_model(c), code=RejectionCode.NO_GPU_MODEL)
        if c.needs.gpu_requests.healthy_only and gpu.health.state is GpuHealthState.AT_RISK:
            return Rejection(
                filter=NAME, reason=gpu_at_risk(gpu_id), code=RejectionCode.GPU_AT_RISK
            )
        if gpu.uuid not in c.free.gpu_ids:
            return Rejection(
                filter=NAME,
                reason=gpu_in_use(gpu_id),
                room=True,
                need=1,
                have=0,
                code=RejectionCode.GPU_IN_USE,
            )
    return None
