"""The scheduler loop: queue order, queue reasons, and the only writer of assignments."""

from .decide import Decisions, PassContext, Session, SessionFactory, decide, engine
from .loop import PassResult, Scheduler

__all__ = [
    "Decisions",
    "PassContext",
    "PassResult",
    "Scheduler",
    "Session",
    "SessionFactory",
    "decide",
    "engine",
]
