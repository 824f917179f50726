"""`machines`, `machine NAME`, `cordon`, `uncordon`, `label`, `reserve`, `unreserve`."""

from __future__ import annotations

import argparse

from astraeus.shared.machines import (
    CordonBody,
    LabelsBody,
    MachineDetail,
    MachineList,
    ReservationSpec,
    StoredReservation,
)

from .bodies import body
from .context import Context
from .errors import Exit
from .flags import parse_pairs
from .machines_view import machine_page, machine_rows


def machines(ctx: Context, args: argparse.Namespace) -> int:
    """One request: the list carries each machine's GPUs by model and health."""
    listed = MachineList.model_validate(ctx.api.get("/machines"))
    ctx.emit(listed, machine_rows(listed.machines))
    return Exit.OK


def _detail(ctx: Context, name: str) -> MachineDetail:
    return MachineDetail.model_validate(ctx.api.get(f"/machines/{name}"))


def machine(ctx: Context, args: argparse.Namespace) -> int:
    detail = _detail(ctx, args.name)
    ctx.emit(detail, machine_page(detail))
    return Exit.OK


def cordon(ctx: Context, args: argparse.Namespace) -> int:
    sent = body(CordonBody, reason=args.reason).model_dump(mode="json")
    detail = MachineDetail.model_validate(ctx.api.post(f"/machines/{args.name}/cordon", sent))
    why = f": {detail.cordon_reason}" if detail.cordon_reason else ""
    ctx.emit(detail, [f"{detail.name}: cordoned{why}"])
    return Exit.OK


def uncordon(ctx: Context, args: argparse.Namespace) -> int:
    detail = MachineDetail.model_validate(ctx.api.post(f"/machines/{args.name}/uncordon"))
    ctx.emit(detail, [f"{detail.name}: accepting runs"])
    return Exit.OK


def label(ctx: Context, args: argparse.Namespace) -> int:
    sent = body(LabelsBody, labels=parse_pairs(args.labels, "labels"))
    detail = MachineDetail.model_validate(
        ctx.api.put(f"/machines/{args.name}/labels", sent.model_dump(mode="json"))
    )
    shown = ", ".join(f"{k}={v}" for k, v in sorted(detail.labels.items()))
    ctx.emit(detail, [f"{detail.name}: {shown}"])
    return Exit.OK


def reserve(ctx: Context, args: argparse.Namespace) -> int:
    sent = body(
        ReservationSpec,
        labels=parse_pairs(args.label, "--label"),
        workspace=args.for_workspace,
        starts_at=args.starts_at,
        ends_at=args.ends_at,
    )
    stored = StoredReservation.model_validate(
        ctx.api.post(
            f"/machines/{args.name}/reservations",
            sent.model_dump(mode="json", exclude_none=True),
        )
    )
    ctx.emit(stored, [f"{args.name}: reservation #{stored.id} added"])
    return Exit.OK


def unreserve(ctx: Context, args: argparse.Namespace) -> int:
    ctx.api.delete(f"/machines/{args.name}/reservations/{args.id}")
    ctx.emit({"removed": args.id}, [f"{args.name}: reservation #{args.id} removed"])
    return Exit.OK
