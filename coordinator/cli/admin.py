"""Admin commands: workspaces (pools, GPU, CPU and memory quotas, highest priority,
fair-share weight) and API tokens."""

from __future__ import annotations

import argparse

from astraeus.shared.admin import (
    NewToken,
    TokenBody,
    TokenList,
    Workspace,
    WorkspaceBody,
    WorkspaceList,
)

from .bodies import body
from .client import segment
from .context import Context
from .errors import Exit
from .flags import parse_pairs, parse_size
from .render import table

HEADER = [
    "NAME",
    "POOLS",
    "GPU QUOTA",
    "CPU QUOTA",
    "MEMORY QUOTA",
    "MAX PRIORITY",
    "WEIGHT",
    "GUARANTEED",
]


def _workspace_line(w: Workspace) -> list[str]:
    gpus = "-" if w.gpu_quota is None else str(w.gpu_quota)
    cores = "-" if w.cpu_quota is None else f"{w.cpu_quota:g}"
    memory = "-" if w.memory_quota is None else f"{round(w.memory_quota / 1024**3, 2):g}G"
    return [
        w.name,
        ",".join(w.pools) or "-",
        gpus,
        cores,
        memory,
        str(w.max_priority),
        f"{w.fair_share_weight:g}",
        str(w.guaranteed_gpus),
    ]


def workspaces(ctx: Context, args: argparse.Namespace) -> int:
    found = WorkspaceList.model_validate(ctx.api.get("/workspaces"))
    ctx.emit(found, table([HEADER, *(_workspace_line(w) for w in found.workspaces)]))
    return Exit.OK


def workspace_show(ctx: Context, args: argparse.Namespace) -> int:
    found = Workspace.model_validate(ctx.api.get(f"/workspaces/{segment(args.name)}"))
    ctx.emit(found, table([HEADER, _workspace_line(found)]))
    return Exit.OK


def workspace_set(ctx: Context, args: argparse.Namespace) -> int:
    """Create or replace a workspace: its pools, GPU, CPU and memory quotas, highest priority,
    fair-share weight and guaranteed GPUs."""
    memory = (
        parse_size(args.memory_quota, "--memory-quota") if args.memory_quota is not None else None
    )
    sent = body(
        WorkspaceBody,
        pools=args.pool,
        gpu_quota=args.gpu_quota,
        cpu_quota=args.cpu_quota,
        memory_quota=memory,
        max_priority=args.max_priority,
        fair_share_weight=args.fair_share_weight,
        guaranteed_gpus=args.guaranteed_gpus,
    )
    saved = Workspace.model_validate(
        ctx.api.put(f"/workspaces/{segment(args.name)}", sent.model_dump(mode="json"))
    )
    pools = ", ".join(saved.pools) or "every pool"
    ctx.emit(saved, [f"workspace {saved.name}: {pools}"])
    return Exit.OK


def tokens(ctx: Context, args: argparse.Namespace) -> int:
    found = TokenList.model_validate(ctx.api.get("/tokens"))
    rows = [["ID", "ROLE", "FOR", "CREATED", "DESCRIPTION"]]
    rows += [
        [str(t.id), t.role, t.workspace or t.machine or "-", t.created_at, t.description]
        for t in found.tokens
    ]
    ctx.emit(found, table(rows))
    return Exit.OK


def token_create(ctx: Context, args: argparse.Namespace) -> int:
    """Print the new secret alone, so `$(astra astraeus token create ...)` captures it."""
    sent = body(
        TokenBody,
        role=args.role,
        workspace=args.for_workspace,
        machine=args.machine,
        description=args.description,
        labels=parse_pairs(args.label, "--label"),
    )
    made = NewToken.model_validate(ctx.api.post("/tokens", sent.model_dump(mode="json")))
    ctx.emit(made, [made.token])
    return Exit.OK


def token_revoke(ctx: Context, args: argparse.Namespace) -> int:
    ctx.api.delete(f"/tokens/{args.id}")
    ctx.emit({"revoked": args.id}, [f"token {args.id} revoked"])
    return Exit.OK
