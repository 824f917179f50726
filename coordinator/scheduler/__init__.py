"""The scheduler loop: queue order, queue reasons, and the only writer of assignments."""

from .compute import PassInputs, PassState, compute_pass
from .loop import PassResult, Scheduler, warm_worker, worker_pool
from .queue_walk import EngineSession, PassContext, PassOutcome, SessionFactory, decide

__all__ = [
    "EngineSession",
    "PassContext",
    "PassInputs",
    "PassOutcome",
    "PassResult",
    "PassState",
    "Scheduler",
    "SessionFactory",
    "compute_pass",
    "decide",
    "warm_worker",
    "worker_pool",
]
