"""Workspaces and tokens: admin only."""

from __future__ import annotations

from datetime import datetime

from aiohttp import web
from pydantic import BaseModel, ValidationError

from astraeus.coordinator.machine_records import MachineRecords
from astraeus.coordinator.store import Role, Store, TokenInfo
from astraeus.shared import field_errors
from astraeus.shared.admin import (
    NewToken,
    TokenBody,
    TokenInfoView,
    TokenList,
    Workspace,
    WorkspaceBody,
    WorkspaceList,
    WorkspaceSpec,
)

from .auth import require_admin
from .errors import ApiError, fail, not_found, read_model, row_id
from .keys import CLOCK, RECORDS, SCHEDULER, STORE
from .routes import Route


def _json(model: BaseModel, status: int = 200) -> web.Response:
    return web.Response(
        text=model.model_dump_json(), status=status, content_type="application/json"
    )


async def list_workspaces(request: web.Request) -> web.Response:
    require_admin(request)
    return _json(WorkspaceList(workspaces=request.app[STORE].workspaces.all()))


async def get_workspace(request: web.Request) -> web.Response:
    require_admin(request)
    name = request.match_info["name"]
    workspace = request.app[STORE].workspaces.get(name)
    if workspace is None:
        not_found("workspace", name)
    return _json(workspace)


async def put_workspace(request: web.Request) -> web.Response:
    require_admin(request)
    body = await read_model(request, WorkspaceBody)
    try:
        spec = WorkspaceSpec(name=request.match_info["name"], **body.model_dump())
    except ValidationError as exc:
        raise ApiError(400, "invalid workspace", field_errors(WorkspaceSpec, exc)) from None
    store = request.app[STORE]
    workspace, created = await store.database.run(
        store.workspaces.put, spec, request.app[CLOCK].now()
    )
    request.app[SCHEDULER].poke()
    return _json(workspace, status=201 if created else 200)


def _token_view(info: TokenInfo) -> TokenInfoView:
    return TokenInfoView.model_validate(info.as_dict())


async def list_tokens(request: web.Request) -> web.Response:
    require_admin(request)
    infos = request.app[STORE].tokens.all()
    return _json(TokenList(tokens=[_token_view(i) for i in infos]))


async def create_token(request: web.Request) -> web.Response:
    require_admin(request)
    body = await read_model(request, TokenBody)
    store = request.app[STORE]
    role = Role(body.role)
    if role == Role.MEMBER and (
        body.workspace is None or store.workspaces.get(body.workspace) is None
    ):
        fail(
            400,
            "a member token needs an existing workspace",
            "workspace",
            "must name an existing workspace for a member token",
        )
    if role == Role.AGENT and body.machine is None:
        fail(400, "an agent token needs its machine", "machine", "is required for an agent token")
    if body.labels and role != Role.AGENT:
        fail(400, "only an agent token binds labels", "labels", "is for agent tokens only")
    now = request.app[CLOCK].now()
    records = request.app[RECORDS]
    secret, info = await store.database.run(_create_token, store, records, body, role, now)
    if role == Role.AGENT and body.labels:
        request.app[SCHEDULER].poke()
    return _json(NewToken(token=secret, info=_token_view(info)), status=201)


def _create_token(
    store: Store, records: MachineRecords, body: TokenBody, role: Role, now: datetime
) -> tuple[str, TokenInfo]:
    """On the writer thread: an agent token's machine (and the labels it binds), then the
    token."""
    if role == Role.AGENT and body.machine is not None:
        record = records.ensure(body.machine, now)
        if body.labels:
            # Bound by the admin who makes the token, like a kubelet's --node-labels that only
            # the admin's provisioning may set.
            records.set_labels(body.machine, {**record.admin_labels, **body.labels})
    return store.tokens.create(
        role,
        now,
        workspace=body.workspace if role == Role.MEMBER else None,
        machine=body.machine if role == Role.AGENT else None,
        description=body.description,
    )


async def revoke_token(request: web.Request) -> web.Response:
    require_admin(request)
    raw = request.match_info["id"]
    found = row_id(raw)
    store = request.app[STORE]
    if found is None or not await store.database.run(store.tokens.revoke, found):
        not_found("token", raw)
    return web.Response(status=204)


ROUTES = (
    Route(
        "GET",
        "/api/v1/workspaces",
        list_workspaces,
        "List workspaces",
        "admin",
        response=WorkspaceList,
    ),
    Route(
        "GET",
        "/api/v1/workspaces/{name}",
        get_workspace,
        "A workspace",
        "admin",
        response=Workspace,
    ),
    Route(
        "PUT",
        "/api/v1/workspaces/{name}",
        put_workspace,
        "Create (201) or change a workspace: pools, GPU quota, highest priority",
        "admin",
        body=WorkspaceBody,
        response=Workspace,
    ),
    Route(
        "GET",
        "/api/v1/tokens",
        list_tokens,
        "List tokens (never the secrets)",
        "admin",
        response=TokenList,
    ),
    Route(
        "POST",
        "/api/v1/tokens",
        create_token,
        "Create a token: member (for a workspace), agent (for a machine) or admin",
        "admin",
        body=TokenBody,
        response=NewToken,
        status=201,
    ),
    Route("DELETE", "/api/v1/tokens/{id}", revoke_token, "Revoke a token", "admin", status=204),
)
