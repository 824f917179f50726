"""`GET /api/v1/cluster/map`: every visible machine with each GPU's health and holder, in one
compact answer: what the console's cluster map and machines table draw from.

A member sees the machines of its workspace's pools only (as `GET /api/v1/machines`), and the
names of its own workspace's runs only: a GPU another workspace's run holds says so, unnamed.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from aiohttp import web

from astraeus.coordinator.machine_records import MachineRecord, network_site
from astraeus.coordinator.store import Role
from astraeus.coordinator.store.db import Database
from astraeus.coordinator.store.runs import submitted_name
from astraeus.shared import GpuInfo, LinkLayer, MachineReport
from astraeus.shared.labels import FABRIC, POOL, RACK, SITE
from astraeus.shared.views import ClusterMap

from .auth import principal, visible_pools
from .keys import CLOCK, RECORDS, SCHEDULER, STORE
from .routes import Route

OTHERS = {"name": None, "workspace": None}


Holders = dict[str, dict[str, tuple[str, str]]]


def _holders(database: Database) -> Holders:
    """Machine → GPU UUID → (run, workspace), for every GPU a task holds: a live one, or a Lost
    one whose worker may still run (`held`), the rule `read_usage` counts by. One row per task,
    not per GPU."""
    rows = database.read(
        "SELECT tasks.machine, tasks.gpu_ids, runs.name, runs.workspace"
        " FROM tasks JOIN runs ON runs.seq = tasks.run_seq"
        " WHERE (tasks.state IN ('Assigned', 'Starting', 'Running') OR tasks.held = 1)"
        " AND tasks.gpu_ids != '[]'"
    )
    held: Holders = {}
    for r in rows:
        on = held.setdefault(r["machine"], {})
        for gpu in json.loads(r["gpu_ids"]):
            on[gpu] = (submitted_name(r["name"]), r["workspace"])
    return held


class _Index:
    """Values listed once in the answer, each kept at the position it was first seen."""

    def __init__(self) -> None:
        self.items: list[object] = []
        self._at: dict[object, int] = {}

    def of(self, key: object, item: object) -> int:
        at = self._at.get(key)
        if at is None:
            at = self._at[key] = len(self.items)
            self.items.append(item)
        return at


def network_of(report: MachineReport | None) -> str:
    """InfiniBand if an active port is; RoCE for active RDMA over Ethernet; else Ethernet.
    Omni-Path ports count as neither (placement never uses them for RDMA)."""
    ports = report.rdma_ports if report else []
    layers = {p.link_layer for p in ports if p.up and not p.omni_path}
    if LinkLayer.INFINIBAND in layers:
        return "InfiniBand"
    return "RoCE" if layers else "Ethernet"


def ethernet_of(report: MachineReport | None) -> int | None:
    """The speed of the fastest Ethernet interface that is up (as `GET /api/v1/machines`)."""
    interfaces = report.network_interfaces if report else []
    speeds = [i.speed_mbps for i in interfaces if i.up and i.kind == "ethernet" and i.speed_mbps]
    return max(speeds, default=None)


def _fabric(labels: dict[str, str], report: MachineReport | None) -> str | None:
    label = labels.get(FABRIC)
    if label or report is None:
        return label
    named = sorted({p.fabric for p in report.rdma_ports if p.fabric and p.up and not p.omni_path})
    return named[0] if named else None


class _Builder:
    def __init__(self, holders: Holders, own: str | None) -> None:
        self.holders = holders
        self.own = own
        """The member's workspace; None for an admin, who sees every run's name."""
        self.models = _Index()
        self.runs = _Index()

    def holder(self, held: tuple[str, str] | None) -> int | None:
        if held is None:
            return None
        if self.own is not None and held[1] != self.own:
            return self.runs.of(None, OTHERS)
        return self.runs.of(held, {"name": held[0], "workspace": held[1]})

    def machine(self, record: MachineRecord, now: datetime, down_after: timedelta) -> object:
        report = record.report
        labels = record.labels
        gpus = report.gpus if report else []
        domains = sorted({g.nvlink_domain for g in gpus if g.nvlink_domain})
        return {
            "name": record.name,
            "state": record.state(now, down_after),
            "site": labels.get(SITE) or network_site(record.address),
            "rack": labels.get(RACK),
            "fabric": _fabric(labels, report),
            "network": network_of(report),
            "nvlink_domain": domains[0] if domains else None,
            "ethernet_mbps": ethernet_of(report),
            "cordoned": record.cordon_reason is not None,
            "cordon_reason": record.cordon_reason,
            "conditions": list(report.conditions) if report else [],
            "gpus": self.gpus(gpus, self.holders.get(record.name)),
        }

    def gpus(self, gpus: list[GpuInfo], held: dict[str, tuple[str, str]] | None) -> list[object]:
        """Each GPU as [index, model, health, run]. Health is a StrEnum: json writes its value.
        Models and runs are looked up once per machine, not per GPU (40,000 GPUs)."""
        model_at = {model: self.models.of(model, model) for model in {g.model for g in gpus}}
        run_at = {uuid: self.holder(holder) for uuid, holder in (held or {}).items()}
        return [(g.index, model_at[g.model], g.health.state, run_at.get(g.uuid)) for g in gpus]


def _visible(record: MachineRecord, pools: tuple[str, ...] | None) -> bool:
    """The rule of `GET /api/v1/machines`: admins see all; members their pools' machines."""
    return pools is None or not pools or record.labels.get(POOL) in pools


async def cluster_map(request: web.Request) -> web.Response:
    pools = visible_pools(request)  # refuses agents
    who = principal(request)
    store = request.app[STORE]
    own = None if who.role == Role.ADMIN else (who.workspace or "")
    build = _Builder(_holders(store.database), own)
    now, down_after = request.app[CLOCK].now(), request.app[SCHEDULER].down_after
    machines = [
        build.machine(record, now, down_after)
        for record in request.app[RECORDS].all()
        if _visible(record, pools)
    ]
    body = {"models": build.models.items, "runs": build.runs.items, "machines": machines}
    # Built as plain data and written in one call: 40,000 GPUs as pydantic objects would cost
    # the event loop several times as long. `ClusterMap` is the schema it follows.
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    return web.Response(text=text, content_type="application/json")


ROUTES = (
    Route(
        "GET",
        "/api/v1/cluster/map",
        cluster_map,
        "Every machine with each GPU's health and holder: the console's map and machines table",
        "member",
        response=ClusterMap,
    ),
)
