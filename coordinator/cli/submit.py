"""`run`: submit a run, or ask where it would go (`--dry-run`). The spec goes as written and the
answers are read as the API's JSON comes (`DryRun`, `Run`, `ClusterView` of `shared/`, field for
field): a refused spec is said field by field by `spec.invalid_spec`."""

from __future__ import annotations

import sys

from .client import Api, segment
from .context import Context, printable
from .errors import CliError, Exit
from .render import Answer, grouped_why_lines, reason_kind, table, why_lines
from .spec import build_spec, invalid_spec

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from typing import Any

GIB = 1024**3


def run(ctx: Context, args: argparse.Namespace) -> int:
    spec = build_spec(args, ctx.api.target.workspace)
    name = spec["name"]
    if args.dry_run:
        # Grouped by reason unless JSON is asked: the answer's size does not grow with the cluster.
        grouping = {} if ctx.json else {"explain": "grouped"}
        dry = checked(spec, lambda: ctx.api.post("/runs", spec, dry_run="true", **grouping))
        ctx.emit(dry, dry_run_lines(name, dry))
        return Exit.OK
    # A dry run first: a run no machine of the workspace could ever hold is still accepted
    # (it waits, with its reasons), but the user hears it now, not after waiting in vain.
    # The warning is a courtesy: a dry run that fails (a refusal the submission will repeat in
    # its own words, a blip) never keeps the run from being submitted; a spec that is not valid
    # is said now, field by field.
    try:
        before: Answer | None = ctx.api.post("/runs", spec, dry_run="true", explain="grouped")
    except CliError:
        problem = invalid_spec(spec)
        if problem is not None:
            raise problem from None
        before = None
    submitted: Answer = checked(spec, lambda: ctx.api.post("/runs", spec))
    ctx.emit(submitted, [submitted_line(ctx.api, submitted["name"])])
    warning = (
        None
        if before is None
        else never_fits_warning(submitted["name"], submitted["workspace"], before)
    )
    if warning is not None:
        print(f"astra: warning: {printable(warning)}", file=sys.stderr)
    return Exit.OK


def checked(spec: dict[str, Any], call: Callable[[], Any]) -> Any:
    """The coordinator's answer to `call`, which sends `spec`; when it fails, a spec that is not
    valid is said field by field (exit 2), as `astra` said it before sending anything."""
    try:
        return call()
    except CliError:
        problem = invalid_spec(spec)
        if problem is None:
            raise
        raise problem from None


def never_fits_warning(name: str, workspace: str, dry: Answer) -> str | None:
    """One sentence when the coordinator's dry run says no machine of the workspace could ever
    hold the run as asked (`shared.reasons.never_fits`), with its reason; else None."""
    if dry["would_start"]:
        return None
    from astraeus.shared.reasons import never_fits  # a run that waits: its reason's rules

    grouped = dry["placement_grouped"]
    codes = [group["code"] for group in grouped["reasons"]] if grouped else []
    if not never_fits(reason_kind(dry["reason_kind"]), codes):
        return None
    return (
        f"no machines of workspace {workspace} could ever hold {name} as asked"
        f" ({dry['reason']}); it waits until the run or the machines change:"
        f" astra astraeus status {name} --why"
    )


def submitted_line(api: Api, name: str) -> str:
    """`<name> submitted to <cluster>: <the run's page in the console>`, as in the guide."""
    cluster: Answer = api.get("/cluster")
    link = run_link(cluster["console_url"], cluster["name"], name)
    return f"{name} submitted to {cluster['name']}: {link}"


def run_link(console_url: str, cluster: str, run: str) -> str:
    """The run's page in the guide's form, `<console_url>jobs/<cluster>/<run>`: the cluster's
    name, as after "submitted to", then the run's; each escaped as one path segment. The
    workspace is the visitor's (or part of `console_url`, behind a proxy that names it)."""
    base = console_url if console_url.endswith("/") else console_url + "/"
    parts = (segment(part) for part in (cluster, run))
    return f"{base}jobs/{'/'.join(parts)}"


def dry_run_lines(name: str, dry: Answer) -> list[str]:
    """Where the run `name` would start now, worker by worker; else why it would wait."""
    kind = reason_kind(dry["reason_kind"])
    if not dry["would_start"]:
        from astraeus.shared.reasons import ReasonKind  # loaded by `kind` already, if any

        if kind is ReasonKind.PREEMPTING:  # its cost, before anything is stopped
            return [f"{name} {dry['reason']}"]
        lines = [f"{name} would wait — {dry['reason']}"]
        if dry["placement_grouped"] is not None:
            return lines + grouped_why_lines(dry["placement_grouped"], kind)
        placement = dry["placement"]
        return lines + (why_lines(placement, kind, dry["rejections"]) if placement else [])
    why = dry["shape"]["why"] if dry["shape"] else "now"
    rows = [
        [
            f"{name}-{w['index']}",
            w["machine"],
            f"{len(w['assigned_gpu_ids'])} GPUs",
            f"{w['cpu_cores']:g} cores",
            f"{w['memory_bytes'] / GIB:g} GiB",
        ]
        for w in dry["workers"]
    ]
    return [f"{name} would start now — {why}", *table(rows, indent="  ")]
