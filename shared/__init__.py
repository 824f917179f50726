"""The wire contract between agent and coordinator: models and the guide's texts, with no
I/O; beside them, in their own modules, the two helpers both programs use (`tls`, `sdnotify`).

Each name is imported from its module when first used (PEP 562), so a program that needs one
model, such as `astra status` needing `Run`, does not build every model of the contract.

`_EXPORTS` is the one list of what this package exports and where each name lives; `__all__`
and the lazy lookup are made from it. The `TYPE_CHECKING` imports say the same to mypy (which
cannot read a table), and `tests/test_shared_exports.py` fails when the two differ."""

from __future__ import annotations

TYPE_CHECKING = False
"""`typing.TYPE_CHECKING` without `typing`: `astra status` loads this package for one helper."""
if TYPE_CHECKING:
    from . import labels as labels
    from . import reasons as reasons
    from .ask import ArraySpec as ArraySpec
    from .ask import DriveMount as DriveMount
    from .ask import GpuRequests as GpuRequests
    from .ask import Network as Network
    from .ask import NodeSelection as NodeSelection
    from .ask import PerGpu as PerGpu
    from .ask import RequestedResources as RequestedResources
    from .ask import Topology as Topology
    from .assignment import AgentReport as AgentReport
    from .assignment import Assignment as Assignment
    from .assignment import BusyPort as BusyPort
    from .assignment import LogChunk as LogChunk
    from .assignment import Mount as Mount
    from .assignment import NetworkKind as NetworkKind
    from .assignment import PortSpan as PortSpan
    from .assignment import Rendezvous as Rendezvous
    from .assignment import ReportReply as ReportReply
    from .assignment import TaskUpdate as TaskUpdate
    from .choices import Capability as Capability
    from .choices import GpuPolicy as GpuPolicy
    from .choices import Interconnect as Interconnect
    from .choices import KeepWithin as KeepWithin
    from .choices import SelectionMode as SelectionMode
    from .choices import Spread as Spread
    from .choices import Vendor as Vendor
    from .explanation import GroupedExplanation as GroupedExplanation
    from .explanation import MachineState as MachineState
    from .explanation import NodeReasons as NodeReasons
    from .explanation import PendingExplanation as PendingExplanation
    from .explanation import ReasonCount as ReasonCount
    from .report import SCHEMA_VERSION as SCHEMA_VERSION
    from .report import BackendStatus as BackendStatus
    from .report import DriveInfo as DriveInfo
    from .report import GpuHealth as GpuHealth
    from .report import GpuHealthState as GpuHealthState
    from .report import GpuInfo as GpuInfo
    from .report import HealthSignal as HealthSignal
    from .report import ImexStatus as ImexStatus
    from .report import LinkLayer as LinkLayer
    from .report import MachineReport as MachineReport
    from .report import NetworkInterface as NetworkInterface
    from .report import PressureCondition as PressureCondition
    from .report import RdmaPort as RdmaPort
    from .run import Attempt as Attempt
    from .run import Landing as Landing
    from .run import Run as Run
    from .run import RunSpec as RunSpec
    from .run import RunState as RunState
    from .run import Shape as Shape
    from .run import Task as Task
    from .run import TaskState as TaskState
    from .run import task_name as task_name
    from .validation import FieldError as FieldError
    from .validation import describe as describe
    from .validation import field_errors as field_errors

_EXPORTS: dict[str, tuple[str, ...]] = {
    "ask": (
        "ArraySpec",
        "DriveMount",
        "GpuRequests",
        "Network",
        "NodeSelection",
        "PerGpu",
        "RequestedResources",
        "Topology",
    ),
    "assignment": (
        "AgentReport",
        "Assignment",
        "BusyPort",
        "LogChunk",
        "Mount",
        "NetworkKind",
        "PortSpan",
        "Rendezvous",
        "ReportReply",
        "TaskUpdate",
    ),
    "choices": (
        "Capability",
        "GpuPolicy",
        "Interconnect",
        "KeepWithin",
        "SelectionMode",
        "Spread",
        "Vendor",
    ),
    "explanation": (
        "GroupedExplanation",
        "MachineState",
        "NodeReasons",
        "PendingExplanation",
        "ReasonCount",
    ),
    "report": (
        "SCHEMA_VERSION",
        "BackendStatus",
        "DriveInfo",
        "GpuHealth",
        "GpuHealthState",
        "GpuInfo",
        "HealthSignal",
        "ImexStatus",
        "LinkLayer",
        "MachineReport",
        "NetworkInterface",
        "PressureCondition",
        "RdmaPort",
    ),
    "run": (
        "Attempt",
        "Landing",
        "Run",
        "RunSpec",
        "RunState",
        "Shape",
        "Task",
        "TaskState",
        "task_name",
    ),
    "validation": (
        "FieldError",
        "describe",
        "field_errors",
    ),
}
"""Module → the names it exports through this package."""

_SUBMODULES = ("labels", "reasons")
"""Modules exported whole: `shared.labels.POOL`, `shared.reasons.ANOTHER_WORKSPACE`."""

_HOME = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted([*_HOME, *_SUBMODULES])


def __getattr__(name: str) -> object:
    import importlib

    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
