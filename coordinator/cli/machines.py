"""`machines`, `machine NAME`, `machine forget NAME`, `cordon`, `uncordon`, `label`, `reserve`,
`unreserve`."""

from __future__ import annotations

import argparse
import sys

from astraeus.shared.machines import (
    CordonBody,
    ForgottenMachine,
    LabelsBody,
    MachineDetail,
    MachineList,
    ReservationSpec,
    StoredReservation,
)

from .bodies import body
from .context import Context, printable
from .errors import CliError, Exit
from .flags import parse_pairs
from .machines_view import machine_page, machine_rows

NO_MACHINES = (
    "no machines yet (none you may use): a machine joins when its agent first reports, with an"
    " agent token an admin makes for it (astra astraeus token create --role agent --machine NAME;"
    " docs/operator.md)"
)


def machines(ctx: Context, args: argparse.Namespace) -> int:
    """One request: the list carries each machine's GPUs by model and health."""
    listed = MachineList.model_validate(ctx.api.get("/machines"))
    ctx.emit(listed, machine_rows(listed.machines) if listed.machines else [NO_MACHINES])
    return Exit.OK


def _detail(ctx: Context, name: str) -> MachineDetail:
    return MachineDetail.model_validate(ctx.api.get(f"/machines/{name}"))


FORGET = "forget"


def machine(ctx: Context, args: argparse.Namespace) -> int:
    """`machine NAME`, or `machine forget NAME`."""
    if args.name == FORGET and args.forgotten is not None:
        return forget(ctx, args.forgotten, yes=args.yes)
    if args.forgotten is not None:
        raise CliError(
            f"unknown machine action {args.name!r}: `machine NAME` shows a machine,"
            " `machine forget NAME` forgets one",
            Exit.USAGE,
        )
    if args.name == FORGET:
        raise CliError("forget needs the machine: astra astraeus machine forget NAME", Exit.USAGE)
    if args.yes:
        raise CliError("--yes goes with `machine forget NAME`", Exit.USAGE)
    detail = _detail(ctx, args.name)
    ctx.emit(detail, machine_page(detail))
    return Exit.OK


def forget(ctx: Context, name: str, *, yes: bool) -> int:
    """Forget a machine that will never return, once the admin said yes (or gave `--yes`)."""
    if not yes:
        _confirm(_detail(ctx, name))
    done = ForgottenMachine.model_validate(ctx.api.post(f"/machines/{name}/forget"))
    lost = ", ".join(done.tasks_lost) or "none"
    ctx.emit(
        done,
        [
            f"{done.name} forgotten: {_count(len(done.tasks_lost), 'task')} Lost ({lost}),"
            f" {_count(done.gpus_released, 'GPU')} released,"
            f" {_count(done.reservations_removed, 'reservation')} removed,"
            f" {_count(done.agent_tokens_revoked, 'agent token')} revoked",
        ],
    )
    return Exit.OK


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _confirm(detail: MachineDetail) -> None:
    """Ask on the terminal (the question on stderr, so `-o json` stays clean); refuse without
    one, where nobody can answer."""
    if not sys.stdin.isatty():
        raise CliError(
            f"forget asks for confirmation on a terminal: add --yes to forget {detail.name}"
            " without one",
            Exit.USAGE,
        )
    runs = ", ".join(detail.runs) or "none"
    seen = detail.last_seen.isoformat(timespec="seconds") if detail.last_seen else "never"
    question = (
        f"Forget machine {detail.name} ({detail.state}, last seen {seen})? Its tasks end Lost"
        f" (runs: {runs}) and its {detail.gpus_allocated} GPU(s) in use are released; its"
        " reservations and agent tokens are removed. Only for a machine that will never"
        " return. [y/N] "
    )
    sys.stderr.write(printable(question))  # names and runs came from agents and users
    sys.stderr.flush()
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise CliError(f"{detail.name} not forgotten", Exit.FAILED)


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
