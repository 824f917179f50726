"""Admin commands: workspaces (pools, GPU quota, highest priority) and API tokens."""

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
from .context import Context
from .errors import Exit
from .flags import parse_pairs
from .render import table


def _workspace_line(w: Workspace) -> list[str]:
    quota = "-" if w.gpu_quota is None else str(w.gpu_quota)
    return [w.name, ",".join(w.pools) or "-", quota, str(w.max_priority)]


def workspaces(ctx: Context, args: argparse.Namespace) -> int:
    found = WorkspaceList.model_validate(ctx.api.get("/workspaces"))
    header = ["NAME", "POOLS", "GPU QUOTA", "MAX PRIORITY"]
    ctx.emit(found, table([header, *(_workspace_line(w) for w in found.workspaces)]))
    return Exit.OK


def workspace_show(ctx: Context, args: argparse.Namespace) -> int:
    found = Workspace.model_validate(ctx.api.get(f"/workspaces/{args.name}"))
    header = ["NAME", "POOLS", "GPU QUOTA", "MAX PRIORITY"]
    ctx.emit(found, table([header, _workspace_line(found)]))
    return Exit.OK


def workspace_set(ctx: Context, args: argparse.Namespace) -> int:
    """Create or replace a workspace: its pools, GPU quota and highest priority."""
    sent = body(
        WorkspaceBody, pools=args.pool, gpu_quota=args.gpu_quota, max_priority=args.max_priority
    )
    saved = Workspace.model_validate(
        ctx.api.put(f"/workspaces/{args.name}", sent.model_dump(mode="json"))
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
