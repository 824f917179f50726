"""`machines`, `machine NAME`, `machine forget NAME`, `cordon`, `uncordon`, `label`, `reserve`,
`unreserve`. Answers are read as the API's JSON comes (`render.Answer`); the bodies an admin
sends are built with `shared/machines.py`'s models (`bodies.body`), so a bad value is refused,
naming the field, before it is sent."""

from __future__ import annotations

import sys

from .client import segment
from .context import Context, printable
from .errors import CliError, Exit
from .flags import parse_pairs
from .machines_view import machine_page, machine_rows
from .render import Answer, when

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

NO_MACHINES = (
    "no machines yet (none you may use): a machine joins when its agent first reports, with an"
    " agent token an admin makes for it (astra astraeus token create --role agent --machine NAME;"
    " docs/operator.md)"
)


def machines(ctx: Context, args: argparse.Namespace) -> int:
    """One request: the list carries each machine's GPUs by model and health."""
    listed: Answer = ctx.api.get("/machines")
    found = listed["machines"]
    ctx.emit(listed, machine_rows(found) if found else [NO_MACHINES])
    return Exit.OK


def _detail(ctx: Context, name: str) -> Answer:
    detail: Answer = ctx.api.get(f"/machines/{segment(name)}")
    return detail


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
    done: Answer = ctx.api.post(f"/machines/{segment(name)}/forget")
    lost = ", ".join(done["tasks_lost"]) or "none"
    ctx.emit(
        done,
        [
            f"{done['name']} forgotten: {_count(len(done['tasks_lost']), 'task')} Lost ({lost}),"
            f" {_count(done['gpus_released'], 'GPU')} released,"
            f" {_count(done['reservations_removed'], 'reservation')} removed,"
            f" {_count(done['agent_tokens_revoked'], 'agent token')} revoked",
        ],
    )
    return Exit.OK


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _confirm(detail: Answer) -> None:
    """Ask on the terminal (the question on stderr, so `-o json` stays clean); refuse without
    one, where nobody can answer."""
    name = detail["name"]
    if not sys.stdin.isatty():
        raise CliError(
            f"forget asks for confirmation on a terminal: add --yes to forget {name} without one",
            Exit.USAGE,
        )
    runs = ", ".join(detail["runs"]) or "none"
    last = when(detail["last_seen"])
    seen = last.isoformat(timespec="seconds") if last else "never"
    question = (
        f"Forget machine {name} ({detail['state']}, last seen {seen})? Its tasks end Lost"
        f" (runs: {runs}) and its {detail['gpus_allocated']} GPU(s) in use are released; its"
        " reservations and agent tokens are removed. Only for a machine that will never"
        " return. [y/N] "
    )
    sys.stderr.write(printable(question))  # names and runs came from agents and users
    sys.stderr.flush()
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise CliError(f"{name} not forgotten", Exit.FAILED)


def cordon(ctx: Context, args: argparse.Namespace) -> int:
    from astraeus.shared.machines import CordonBody

    from .bodies import body

    sent = body(CordonBody, reason=args.reason).model_dump(mode="json")
    detail: Answer = ctx.api.post(f"/machines/{segment(args.name)}/cordon", sent)
    why = f": {detail['cordon_reason']}" if detail["cordon_reason"] else ""
    ctx.emit(detail, [f"{detail['name']}: cordoned{why}"])
    return Exit.OK


def uncordon(ctx: Context, args: argparse.Namespace) -> int:
    detail: Answer = ctx.api.post(f"/machines/{segment(args.name)}/uncordon")
    ctx.emit(detail, [f"{detail['name']}: accepting runs"])
    return Exit.OK


def label(ctx: Context, args: argparse.Namespace) -> int:
    from astraeus.shared.machines import LabelsBody

    from .bodies import body

    sent = body(LabelsBody, labels=parse_pairs(args.labels, "labels"))
    detail: Answer = ctx.api.put(
        f"/machines/{segment(args.name)}/labels", sent.model_dump(mode="json")
    )
    shown = ", ".join(f"{k}={v}" for k, v in sorted(detail["labels"].items()))
    ctx.emit(detail, [f"{detail['name']}: {shown}"])
    return Exit.OK


def reserve(ctx: Context, args: argparse.Namespace) -> int:
    from astraeus.shared.machines import ReservationSpec

    from .bodies import body

    sent = body(
        ReservationSpec,
        labels=parse_pairs(args.label, "--label"),
        workspace=args.for_workspace,
        starts_at=args.starts_at,
        ends_at=args.ends_at,
    )
    stored: Answer = ctx.api.post(
        f"/machines/{segment(args.name)}/reservations",
        sent.model_dump(mode="json", exclude_none=True),
    )
    ctx.emit(stored, [f"{args.name}: reservation #{stored['id']} added"])
    return Exit.OK


def unreserve(ctx: Context, args: argparse.Namespace) -> int:
    ctx.api.delete(f"/machines/{segment(args.name)}/reservations/{args.id}")
    ctx.emit({"removed": args.id}, [f"{args.name}: reservation #{args.id} removed"])
    return Exit.OK
