"""Bearer tokens on every route but `/healthz`; who may see and do what."""

from __future__ import annotations

from aiohttp import web

from astraeus.coordinator.store import Principal, Role, StorageError, Store

from .errors import ApiError, Handler, fail
from .keys import OVERLOAD, PRINCIPAL, REJECTIONS, STORE

OPEN_PATHS = frozenset({"/healthz"})


@web.middleware
async def bearer_auth(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.path in OPEN_PATHS:
        return await handler(request)
    scheme, _, secret = request.headers.get("Authorization", "").partition(" ")
    principal = None
    # Tokens are ASCII; bytes that are not (kept by aiohttp as surrogates) are no token at all.
    if scheme.lower() == "bearer" and secret and secret.isascii():
        try:
            principal = request.app[STORE].tokens.authenticate(secret.strip())
        except StorageError as error:
            if _is_report(request):
                # A token that cannot be checked (a PostgreSQL server out of reach, its
                # primary failing over) refuses an agent's report as a storage fault does
                # once it is read: with the report's own `Retry-After`, a fraction of the Down
                # window, not the 5 s told to people.
                raise request.app[OVERLOAD].storage_fault(error) from None
            raise
    if principal is None:
        if _is_report(request):
            machine = request.path.split("/")[4]
            request.app[REJECTIONS].note("unknown token", request.remote, f"for {machine!r}")
        raise ApiError(401, "missing or unknown bearer token: send Authorization: Bearer <token>")
    request[PRINCIPAL] = principal
    return await handler(request)


def _is_report(request: web.Request) -> bool:
    """`PUT /api/v1/machines/{name}/report`, an agent's report."""
    parts = request.path.split("/")
    return (
        request.method == "PUT"
        and len(parts) == 6
        and parts[1:4] == ["api", "v1", "machines"]
        and parts[5] == "report"
    )


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
