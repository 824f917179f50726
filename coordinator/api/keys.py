"""Typed keys for what the app and each request carry."""

from __future__ import annotations

from aiohttp import web

from astraeus.coordinator.api.overload import Overload
from astraeus.coordinator.api.rejections import Rejections
from astraeus.coordinator.machine_records import MachineRecords
from astraeus.coordinator.metrics import Metrics
from astraeus.coordinator.reports import Reports
from astraeus.coordinator.scheduler import Scheduler
from astraeus.coordinator.settings import Settings
from astraeus.coordinator.store import Principal, Store
from astraeus.shared.clock import Clock

SETTINGS = web.AppKey("settings", Settings)
STORE = web.AppKey("store", Store)
CLOCK = web.AppKey("clock", Clock)
SCHEDULER = web.AppKey("scheduler", Scheduler)
RECORDS = web.AppKey("records", MachineRecords)
"""The machines as the coordinator keeps them (`machine_records.py`)."""
REPORTS = web.AppKey("reports", Reports)
"""Agents' reports received (`reports.py`)."""
METRICS = web.AppKey("metrics", Metrics)
PRINCIPAL = web.RequestKey("principal", Principal)
REPORTING: web.AppKey[set[str]] = web.AppKey("reporting")
"""Machines whose report is being received now: one at a time each."""
OVERLOAD = web.AppKey("overload", Overload)
"""How far behind the event loop runs, and reports shed for it (`overload.py`)."""
REJECTIONS = web.AppKey("rejections", Rejections)
"""Agents' reports refused for their token, logged at most once a minute (`rejections.py`)."""
