"""Bearer tokens on every route but `/healthz`; who may see and do what."""

from __future__ import annotations

from aiohttp import web

from astraeus.coordinator.store import Principal, Role, Store

from .errors import ApiError, Handler, fail
from .keys import PRINCIPAL, STORE

OPEN_PATHS = frozenset({"/healthz"})


@web.middleware
async def bearer_auth(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.path in OPEN_PATHS:
        return await handler(request)
    scheme, _, secret = request.headers.get("Authorization", "").partition(" ")
    principal = None
    # Tokens are ASCII; bytes that are not (kept by aiohttp as surrogates) are no token at all.
    if scheme.lower() == "bearer" and secret and secret.isascii():
        principal = request.app[STORE].tokens.authenticate(secret.strip())
    if principal is None:
        raise ApiError(401, "missing or unknown bearer token: send Authorization: Bearer <token>")
    request[PRINCIPAL] = principal
    return await handler(request)


def principal(request: web.Request) -> Principal:
    return request[PRINCIPAL]


def require_admin(request: web.Request) -> Principal:
    who = principal(request)
    if who.role != Role.ADMIN:
        fail(403, "this needs an admin token")
    return who


def require_user(request: web.Request) -> Principal:
    """An admin or a workspace member: agents only report."""
    who = principal(request)
    if who.role == Role.AGENT:
        fail(403, "an agent token may only report for its machine")
    return who


def workspace_of(request: web.Request, asked: str | None) -> str:
    """The workspace a request acts in: a member's own; an admin's must be named and exist."""
    who = require_user(request)
    store: Store = request.app[STORE]
    if who.role == Role.MEMBER:
        assert who.workspace is not None  # noqa: S101 - members always have one
        if asked is not None and asked != who.workspace:
            fail(404, f"no workspace named {asked!r}")
        return who.workspace
    if asked is None:
        fail(400, "an admin must name the workspace", "workspace", "is required for an admin")
    if store.workspaces.get(asked) is None:
        fail(404, f"no workspace named {asked!r}")
    return asked


def visible_pools(request: web.Request) -> tuple[str, ...] | None:
    """The pools a member sees (empty: all machines); None for an admin, who sees everything."""
    who = require_user(request)
    if who.role == Role.ADMIN:
        return None
    workspace = request.app[STORE].workspaces.get(who.workspace or "")
    return tuple(workspace.pools) if workspace else ()
