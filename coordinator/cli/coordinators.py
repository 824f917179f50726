"""`coordinators`: each coordinator astra was given (`--api`, `ASTRA_API`), and whether it leads,
stands by (naming the leader and the fencing epoch) or cannot be reached: which one leads,
before and after a failover drill (docs/operator.md). It reads each one's `/healthz`, which
needs no token."""

from __future__ import annotations

import argparse
import json
import socket
import urllib.error
from typing import Any

from .context import Context
from .errors import Exit
from .render import table

HEADER = ["COORDINATOR", "ROLE", "LEADER", "EPOCH"]


def coordinators(ctx: Context, args: argparse.Namespace) -> int:
    rows = [_ask(ctx, url) for url in ctx.api.target.apis]
    lines = table(
        [HEADER, *([r["coordinator"], r["role"], r["leader"] or "-", _epoch(r)] for r in rows)]
    )
    ctx.emit(rows, lines)
    if any(row["role"] == "leader" for row in rows):
        return Exit.OK
    return Exit.UNREACHABLE


def _epoch(row: dict[str, Any]) -> str:
    return "-" if row["epoch"] is None else str(row["epoch"])


def _ask(ctx: Context, url: str) -> dict[str, Any]:
    """One coordinator's role, from its `/healthz`: 200 leads; 503 `standby` stands by; 503
    `failing` leads but its database takes no writes; no answer: unreachable."""
    row: dict[str, Any] = {"coordinator": url, "role": "unreachable", "leader": None, "epoch": None}
    try:
        opener = ctx.api.opener(url)
        with opener.open(f"{url}/healthz", timeout=ctx.api.timeout) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, socket.timeout | TimeoutError):
            reason = "no answer"
        elif isinstance(reason, OSError) and reason.strerror:
            reason = reason.strerror
        row["role"] = f"unreachable ({reason})"
        return row
    try:
        body = json.loads(raw or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError):
        body = None
    if not isinstance(body, dict):
        row["role"] = f"not a coordinator (HTTP {status})"
        return row
    if body.get("status") == "standby":
        row.update(role="standby", leader=body.get("leader"), epoch=body.get("epoch"))
    elif status == 200:
        row.update(role="leader", leader=url)
    elif body.get("status") == "failing":
        row.update(role=f"leader, failing: {body.get('error')}", leader=url)
    else:
        row["role"] = f"not a coordinator (HTTP {status})"
    return row
