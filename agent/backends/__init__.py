"""GPU discovery backends: one small interface, chosen automatically (see `select`)."""

from .base import BackendUnavailableError, FabricSample, GpuBackend, GpuSample, XidEvent
from .select import open_backend

__all__ = [
    "BackendUnavailableError",
    "FabricSample",
    "GpuBackend",
    "GpuSample",
    "XidEvent",
    "open_backend",
]
