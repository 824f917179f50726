"""The scheduler loop: queue order, queue reasons, and the only writer of assignments."""

from .decide import EngineSession, PassContext, PassOutcome, SessionFactory, decide
from .loop import PassResult, Scheduler, worker_pool

__all__ = [
    "EngineSession",
    "PassContext",
    "PassOutcome",
    "PassResult",
    "Scheduler",
    "SessionFactory",
    "decide",
    "worker_pool",
]
