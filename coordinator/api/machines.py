"""Machines: list and get (members see their pools' only), cordon, labels, reservations, and
forgetting one that will never return."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import datetime

from aiohttp import web
from pydantic import BaseModel

from astraeus.coordinator.machine_records import MachineRecord, takes_runs
from astraeus.coordinator.store import Role
from astraeus.coordinator.store.queue import Usage, read_usage
from astraeus.shared import GpuHealthState, MachineReport, MachineState
from astraeus.shared.labels import FABRIC, POOL, RACK
from astraeus.shared.machines import (
    CordonBody,
    ForgottenMachine,
    GpuView,
    LabelsBody,
    MachineDetail,
    MachineList,
    MachineView,
    ReservationList,
    ReservationSpec,
)
from astraeus.shared.reasons import ANOTHER_WORKSPACE

from .auth import principal, require_admin, visible_pools
from .errors import ApiError, not_found, read_model, row_id
from .keys import CLOCK, RECORDS, REPORTING, SCHEDULER, STORE
from .routes import Route


def _json(model: BaseModel, status: int = 200) -> web.Response:
    return web.Response(
        text=model.model_dump_json(), status=status, content_type="application/json"
    )


def _visible(request: web.Request, record: MachineRecord | None) -> bool:
    pools = visible_pools(request)
    if record is None:
        return False
    return pools is None or not pools or record.labels.get(POOL) in pools


def _record(request: web.Request) -> MachineRecord:
    name = request.match_info["name"]
    record = request.app[RECORDS].get(name)
    if record is None or not _visible(request, record):
        not_found("machine", name)
    return record


def _viewer(request: web.Request) -> str | None:
    """The workspace whose names the caller may see; None for an admin, who sees every name."""
    who = principal(request)
    return None if who.role == Role.ADMIN else (who.workspace or "")


def _shown(viewer: str | None, workspace: str, name: str) -> str:
    """A run's or task's name as the caller may see it."""
    return name if viewer is None or viewer == workspace else ANOTHER_WORKSPACE


def _runs(viewer: str | None, held: Usage) -> list[str]:
    """The runs here, by name; a member sees its own by name and each other as
    `a run of another workspace`, after its own."""
    return sorted(
        (_shown(viewer, workspace, name) for workspace, name in held.runs),
        key=lambda shown: (shown == ANOTHER_WORKSPACE, shown),
    )


def _view(request: web.Request, record: MachineRecord, held: Usage | None) -> dict[str, object]:
    held = held or Usage()
    now = request.app[CLOCK].now()
    report = record.report
    gpus = report.gpus if report else []
    idle = [
        g for g in gpus if g.health.state != GpuHealthState.FAULTED and g.uuid not in held.gpu_ids
    ]
    state = _state(request, record, now)
    usable_now = takes_runs(state, record)
    return {
        "name": record.name,
        "state": state.value,
        "last_seen": record.last_seen,
        "address": record.address,
        "site": record.site,
        "labels": record.labels,
        "cordoned": record.cordon_reason is not None,
        "cordon_reason": record.cordon_reason,
        "gpus_total": len(gpus),
        "gpus_allocated": sum(1 for g in gpus if g.uuid in held.gpu_ids),
        "gpus_free": len(idle) if usable_now else 0,
        "gpus_idle": len(idle),
        "cpu_cores": report.cpu_cores if report else 0,
        "cpu_cores_allocated": held.cpu_cores,
        "memory_bytes": report.memory_bytes if report else 0,
        "memory_bytes_allocated": held.memory_bytes,
        "runs": _runs(_viewer(request), held),
        "rack": record.labels.get(RACK),
        "fabric": record.labels.get(FABRIC),
        **_summary(report, held, usable_now),
    }


def _state(request: web.Request, record: MachineRecord, now: datetime) -> MachineState:
    scheduler = request.app[SCHEDULER]
    return record.state(now, scheduler.down_after, scheduler.heard_since)


def _summary(report: MachineReport | None, held: Usage, usable_now: bool) -> dict[str, object]:
    """GPUs by model and health, conditions, ports and NVLink domains: what lists of machines
    show without each machine's detail."""
    if report is None:
        return {}
    total = Counter(g.model for g in report.gpus)  # keeps the report's order
    idle = Counter(
        g.model
        for g in report.gpus
        if g.health.state != GpuHealthState.FAULTED and g.uuid not in held.gpu_ids
    )
    health = Counter(g.health.state.value for g in report.gpus)
    ports = report.rdma_ports
    return {
        "gpu_models": [
            {"model": m, "total": n, "free": idle[m] if usable_now else 0, "idle": idle[m]}
            for m, n in total.items()
        ],
        "gpu_health": dict(health),
        "conditions": [c.value for c in report.conditions],
        "rdma_fabrics": sorted({p.fabric for p in ports if p.fabric}),
        "rdma_link_layers": sorted(
            {p.link_layer.value for p in ports if p.state == "ACTIVE" and not p.omni_path}
        ),
        "nvlink_domains": sorted({g.nvlink_domain for g in report.gpus if g.nvlink_domain}),
        "ethernet_mbps": max(
            (
                i.speed_mbps
                for i in report.network_interfaces
                if i.up and i.kind == "ethernet" and i.speed_mbps
            ),
            default=None,
        ),
    }


async def list_machines(request: web.Request) -> web.Response:
    usage = read_usage(request.app[STORE].database)
    views = [
        MachineView.model_validate(_view(request, record, usage.get(record.name)))
        for record in request.app[RECORDS].all()
        if _visible(request, record)
    ]
    return _json(MachineList(machines=views))


async def get_machine(request: web.Request) -> web.Response:
    record = _record(request)
    store = request.app[STORE]
    held = read_usage(store.database).get(record.name)
    owners = store.runs.gpu_owners(record.name)
    viewer = _viewer(request)
    gpus = [
        GpuView(
            uuid=g.uuid,
            index=g.index,
            model=g.model,
            health=g.health.state.value,
            task=_shown(viewer, *owners[g.uuid]) if g.uuid in owners else None,
        )
        for g in (record.report.gpus if record.report else [])
    ]
    detail = MachineDetail.model_validate(
        {
            **_view(request, record, held),
            "gpus": gpus,
            "report": record.report,
            "reservations": store.reservations.of(record.name),
        }
    )
    return _json(detail)


async def cordon(request: web.Request) -> web.Response:
    require_admin(request)
    record = _record(request)
    body = await read_model(request, CordonBody)
    records = request.app[RECORDS]
    await request.app[STORE].database.run(records.cordon, record.name, body.reason)
    request.app[SCHEDULER].poke()
    return await get_machine(request)


async def uncordon(request: web.Request) -> web.Response:
    require_admin(request)
    record = _record(request)
    records = request.app[RECORDS]
    await request.app[STORE].database.run(records.cordon, record.name, None)
    request.app[SCHEDULER].poke()
    return await get_machine(request)


async def set_labels(request: web.Request) -> web.Response:
    require_admin(request)
    record = _record(request)
    body = await read_model(request, LabelsBody)
    records = request.app[RECORDS]
    await request.app[STORE].database.run(records.set_labels, record.name, body.labels)
    request.app[SCHEDULER].poke()
    return await get_machine(request)


async def list_reservations(request: web.Request) -> web.Response:
    record = _record(request)
    return _json(ReservationList(reservations=request.app[STORE].reservations.of(record.name)))


async def add_reservation(request: web.Request) -> web.Response:
    require_admin(request)
    record = _record(request)
    spec = await read_model(request, ReservationSpec)
    store = request.app[STORE]
    stored = await store.database.run(store.reservations.add, record.name, spec)
    request.app[SCHEDULER].poke()
    return _json(stored, status=201)


async def remove_reservation(request: web.Request) -> web.Response:
    require_admin(request)
    record = _record(request)
    raw = request.match_info["id"]
    found = row_id(raw)
    store = request.app[STORE]
    if found is None or not await store.database.run(store.reservations.remove, record.name, found):
        not_found("reservation", raw)
    request.app[SCHEDULER].poke()
    return web.Response(status=204)


FORGET_WAIT_SECONDS = 10.0
"""How long a forget waits for a report of the machine being received to finish."""


async def forget(request: web.Request) -> web.Response:
    """End the machine's tasks Lost, give their GPUs back, and remove it with its reservations
    and agent tokens (`Reports.forget`). Its reports wait meanwhile: one being received
    finishes first (else 409), later ones get 429 until it is done, and 401 after (the agent
    token is gone), so no report brings the machine back half-forgotten."""
    who = require_admin(request)
    record = _record(request)
    reporting = request.app[REPORTING]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + FORGET_WAIT_SECONDS
    while record.name in reporting:
        if loop.time() > deadline:
            raise ApiError(
                409,
                f"a report for machine {record.name!r} is still being received: try again",
                headers={"Retry-After": "1"},
            )
        await asyncio.sleep(0.05)
    reporting.add(record.name)  # no await since the check: nothing came in between
    try:
        by = f"admin token {who.token_id}"
        forgotten = await request.app[SCHEDULER].forget(record.name, by)
    finally:
        reporting.discard(record.name)
    if forgotten is None:  # forgotten meanwhile by another request
        not_found("machine", record.name)
    return _json(forgotten)


_M = "/api/v1/machines/{name}"

ROUTES = (
    Route(
        "GET", "/api/v1/machines", list_machines, "List machines", "member", response=MachineList
    ),
    Route(
        "GET",
        _M,
        get_machine,
        "A machine: report, state, free and allocated",
        "member",
        response=MachineDetail,
    ),
    Route(
        "POST",
        f"{_M}/cordon",
        cordon,
        "Stop placing runs here, with a reason",
        "admin",
        body=CordonBody,
        response=MachineDetail,
    ),
    Route("POST", f"{_M}/uncordon", uncordon, "Accept runs again", "admin", response=MachineDetail),
    Route(
        "PUT",
        f"{_M}/labels",
        set_labels,
        "Set the labels admins give this machine",
        "admin",
        body=LabelsBody,
        response=MachineDetail,
    ),
    Route(
        "POST",
        f"{_M}/forget",
        forget,
        "Forget a machine that will never return: its tasks end Lost and their GPUs return;"
        " its row, reservations and agent tokens go",
        "admin",
        response=ForgottenMachine,
        errors={409: "a report of this machine is still being received; Retry-After says when"},
    ),
    Route(
        "GET",
        f"{_M}/reservations",
        list_reservations,
        "The machine's reservations",
        "member",
        response=ReservationList,
    ),
    Route(
        "POST",
        f"{_M}/reservations",
        add_reservation,
        "Reserve the machine",
        "admin",
        body=ReservationSpec,
        status=201,
    ),
    Route(
        "DELETE",
        f"{_M}/reservations/{{id}}",
        remove_reservation,
        "Drop a reservation",
        "admin",
        status=204,
    ),
)
