"""The HTTP API under `/api/v1`."""

from .app import all_routes, create_app
from .keys import CLOCK, METRICS, RECORDS, REPORTS, SCHEDULER, SETTINGS, STORE

__all__ = [
    "CLOCK",
    "METRICS",
    "RECORDS",
    "REPORTS",
    "SCHEDULER",
    "SETTINGS",
    "STORE",
    "all_routes",
    "create_app",
]
