"""Choose the GPU backend, logging why: NVML, then AMD (AMD SMI, else amdgpu from sysfs), then
Intel sysfs, else none."""

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from astraeus.shared import Vendor
from astraeus.shared.clock import Clock

from .amd import AmdBackend, import_amdsmi
from .amdgpu import AmdgpuSysfsBackend, amdgpu_cards
from .base import BackendUnavailableError, GpuBackend, NoGpus
from .intel import IntelBackend, intel_cards
from .nvml import NvmlBackend

if TYPE_CHECKING:
    from astraeus.agent.fake.state import FakeMachine

log = logging.getLogger(__name__)

BACKENDS = ("auto", "nvml", "amdsmi", "intel", "none")
"""Plus `fake:<name or file>`."""


class UnknownBackendError(ValueError):
    pass


def open_backend(choice: str, *, sysfs_root: Path, clock: Clock) -> GpuBackend:
    """The backend named by `choice`; `auto` tries each in turn and says why each was passed
    over. Never raises for missing hardware: the null backend carries the reasons."""
    if choice not in BACKENDS:
        raise UnknownBackendError(
            f"backend {choice!r} is not known; use one of {', '.join(BACKENDS)} or fake:FILE"
        )
    openers: dict[str, Callable[[], GpuBackend]] = {
        "nvml": lambda: _real_nvml(clock),
        "amdsmi": lambda: _amd(sysfs_root),
        "intel": lambda: IntelBackend(sysfs_root),
    }
    names = list(openers) if choice == "auto" else [] if choice == "none" else [choice]
    reasons = []
    for name in names:
        try:
            backend = openers[name]()
        except BackendUnavailableError as exc:
            log.info("GPU backend %s not used: %s", name, exc)
            reasons.append(str(exc))
            continue
        backend.detail += _unused_cards(sysfs_root, name)
        log.info("GPU backend %s chosen: %s", backend.name, backend.detail)
        return backend
    detail = "no GPUs: " + "; ".join(reasons) if reasons else "no GPUs: backend none chosen"
    log.info("GPU backend none chosen: %s", detail)
    return NoGpus(detail)


def _amd(sysfs_root: Path) -> GpuBackend:
    """AMD SMI; where it cannot run but the amdgpu driver has cards, those cards from sysfs."""
    try:
        return AmdBackend(import_amdsmi(), sysfs_root=sysfs_root)
    except BackendUnavailableError as exc:
        if not amdgpu_cards(sysfs_root):
            raise
        why = str(exc).removeprefix("AMD SMI: ")
        log.info("GPU backend amdsmi not used: %s; reading the amdgpu cards from sysfs", why)
        return AmdgpuSysfsBackend(sysfs_root, why=why)


def _unused_cards(sysfs_root: Path, chosen: str) -> str:
    """`; also present, not used: 1 Intel GPU (one GPU backend per machine)`, or nothing."""
    others = {"amdsmi": len(amdgpu_cards(sysfs_root)), "intel": len(intel_cards(sysfs_root))}
    names = {"amdsmi": "AMD", "intel": "Intel"}
    seen = [
        f"{n} {names[k]} GPU{'s' if n > 1 else ''}" for k, n in others.items() if n and k != chosen
    ]
    if not seen:
        return ""
    return f"; also present, not used: {', '.join(seen)} (one GPU backend per machine)"


def open_fake_backend(machine: "FakeMachine", clock: Clock) -> GpuBackend:
    """The backend for a fake machine's GPUs: the real code over the fake vendor module."""
    from astraeus.agent.fake.amdsmi import FakeAmdSmi
    from astraeus.agent.fake.nvml import FakeNvml

    gpus = machine.spec.gpus
    try:
        if gpus.count == 0:
            raise BackendUnavailableError(f"fake machine {machine.name} has no GPUs")
        if machine.root is None:
            raise BackendUnavailableError("fake machine has no sysfs tree; call write_tree() first")
        if gpus.vendor == Vendor.NVIDIA:
            backend: GpuBackend = NvmlBackend(FakeNvml(machine), name="fake", clock=clock)
        elif gpus.vendor == Vendor.AMD:
            backend = AmdBackend(FakeAmdSmi(machine), sysfs_root=machine.root / "sys", name="fake")
        else:
            backend = IntelBackend(machine.root / "sys", name="fake")
    except BackendUnavailableError as exc:
        log.info("GPU backend none chosen: no GPUs: %s", exc)
        return NoGpus(f"no GPUs: {exc}")
    backend.detail = f"fake machine {machine.name}: {backend.detail}"
    log.info("GPU backend fake chosen: %s", backend.detail)
    return backend


def _real_nvml(clock: Clock) -> GpuBackend:
    import pynvml  # type: ignore[import-untyped]

    return NvmlBackend(pynvml, clock=clock)
