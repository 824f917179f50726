"""Choose the GPU backend, logging why: NVML, then AMD SMI, then Intel sysfs, else none."""

import logging
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from astraeus.shared import Vendor

from .amd import AmdBackend, import_amdsmi
from .base import BackendUnavailableError, GpuBackend, NoGpus
from .intel import IntelBackend
from .nvml import NvmlBackend

if TYPE_CHECKING:
    from astraeus.agent.fake.state import FakeMachine

log = logging.getLogger(__name__)

BACKENDS = ("auto", "nvml", "amdsmi", "intel", "none")
"""Plus `fake:<name or file>`."""


class UnknownBackendError(ValueError):
    pass


def open_backend(choice: str, *, sysfs_root: Path, clock: Callable[[], datetime]) -> GpuBackend:
    """The backend named by `choice`; `auto` tries each in turn and says why each was passed
    over. Never raises for missing hardware: the null backend carries the reasons."""
    if choice not in BACKENDS:
        raise UnknownBackendError(
            f"backend {choice!r} is not known; use one of {', '.join(BACKENDS)} or fake:FILE"
        )
    openers: dict[str, Callable[[], GpuBackend]] = {
        "nvml": lambda: _real_nvml(clock),
        "amdsmi": lambda: AmdBackend(import_amdsmi(), sysfs_root=sysfs_root),
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
        log.info("GPU backend %s chosen: %s", name, backend.detail)
        return backend
    detail = "no GPUs: " + "; ".join(reasons) if reasons else "no GPUs: backend none chosen"
    log.info("%s", detail)
    return NoGpus(detail)


def open_fake_backend(machine: "FakeMachine", clock: Callable[[], datetime]) -> GpuBackend:
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
        return NoGpus(f"no GPUs: {exc}")
    backend.detail = f"fake machine {machine.name}: {backend.detail}"
    return backend


def _real_nvml(clock: Callable[[], datetime]) -> GpuBackend:
    import pynvml  # type: ignore[import-untyped]

    return NvmlBackend(pynvml, clock=clock)
