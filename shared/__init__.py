"""The wire contract between agent and coordinator: models and the guide's texts, with no
I/O; beside them, in their own modules, the two helpers both programs use (`tls`, `sdnotify`).

Each name is imported from its module when first used (PEP 562), so a program that needs one
model, such as `astra status` needing `Run`, does not build every model of the contract."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import labels, reasons
    from .ask import (
        ArraySpec,
        Capability,
        DriveMount,
        GpuPolicy,
        GpuRequests,
        Interconnect,
        KeepWithin,
        Network,
        NodeSelection,
        PerGpu,
        RequestedResources,
        SelectionMode,
        Spread,
        Topology,
        Vendor,
    )
    from .assignment import (
        AgentReport,
        Assignment,
        BusyPort,
        LogChunk,
        Mount,
        NetworkKind,
        PortSpan,
        Rendezvous,
        ReportReply,
        TaskUpdate,
    )
    from .explanation import (
        GroupedExplanation,
        MachineState,
        NodeReasons,
        PendingExplanation,
        ReasonCount,
    )
    from .report import (
        SCHEMA_VERSION,
        BackendStatus,
        DriveInfo,
        GpuHealth,
        GpuHealthState,
        GpuInfo,
        HealthSignal,
        ImexStatus,
        LinkLayer,
        MachineReport,
        NetworkInterface,
        PressureCondition,
        RdmaPort,
    )
    from .run import Landing, Run, RunSpec, RunState, Shape, Task, TaskState, task_name
    from .validation import FieldError, describe, field_errors

_HOME: dict[str, str] = {
    "ArraySpec": "ask",
    "Capability": "ask",
    "DriveMount": "ask",
    "GpuPolicy": "ask",
    "GpuRequests": "ask",
    "Interconnect": "ask",
    "KeepWithin": "ask",
    "Network": "ask",
    "NodeSelection": "ask",
    "PerGpu": "ask",
    "RequestedResources": "ask",
    "SelectionMode": "ask",
    "Spread": "ask",
    "Topology": "ask",
    "Vendor": "ask",
    "AgentReport": "assignment",
    "Assignment": "assignment",
    "BusyPort": "assignment",
    "LogChunk": "assignment",
    "Mount": "assignment",
    "NetworkKind": "assignment",
    "PortSpan": "assignment",
    "Rendezvous": "assignment",
    "ReportReply": "assignment",
    "TaskUpdate": "assignment",
    "GroupedExplanation": "explanation",
    "MachineState": "explanation",
    "NodeReasons": "explanation",
    "PendingExplanation": "explanation",
    "ReasonCount": "explanation",
    "BackendStatus": "report",
    "DriveInfo": "report",
    "GpuHealth": "report",
    "GpuHealthState": "report",
    "GpuInfo": "report",
    "HealthSignal": "report",
    "ImexStatus": "report",
    "LinkLayer": "report",
    "MachineReport": "report",
    "NetworkInterface": "report",
    "PressureCondition": "report",
    "RdmaPort": "report",
    "SCHEMA_VERSION": "report",
    "Landing": "run",
    "Run": "run",
    "RunSpec": "run",
    "RunState": "run",
    "Shape": "run",
    "Task": "run",
    "TaskState": "run",
    "task_name": "run",
    "FieldError": "validation",
    "describe": "validation",
    "field_errors": "validation",
}


def __getattr__(name: str) -> Any:
    if name in ("labels", "reasons"):
        return importlib.import_module(f".{name}", __name__)
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "SCHEMA_VERSION",
    "AgentReport",
    "ArraySpec",
    "Assignment",
    "BackendStatus",
    "BusyPort",
    "Capability",
    "DriveInfo",
    "DriveMount",
    "FieldError",
    "GpuHealth",
    "GpuHealthState",
    "GpuInfo",
    "GpuPolicy",
    "GpuRequests",
    "GroupedExplanation",
    "HealthSignal",
    "ImexStatus",
    "Interconnect",
    "KeepWithin",
    "Landing",
    "LinkLayer",
    "LogChunk",
    "MachineReport",
    "MachineState",
    "Mount",
    "Network",
    "NetworkInterface",
    "NetworkKind",
    "NodeReasons",
    "NodeSelection",
    "PendingExplanation",
    "PerGpu",
    "PortSpan",
    "PressureCondition",
    "RdmaPort",
    "ReasonCount",
    "Rendezvous",
    "ReportReply",
    "RequestedResources",
    "Run",
    "RunSpec",
    "RunState",
    "SelectionMode",
    "Shape",
    "Spread",
    "Task",
    "TaskState",
    "TaskUpdate",
    "Topology",
    "Vendor",
    "describe",
    "field_errors",
    "labels",
    "reasons",
    "task_name",
]
