"""Workspaces and tokens as admins write and read them."""

from __future__ import annotations

from pydantic import Field

from .base import UserModel, WireModel
from .report import MAX_LABELS, LabelKey, LabelValue


class Workspace(WireModel):
    """A workspace: the pools it is granted, its GPU quota, the highest priority allowed."""

    name: str
    pools: list[str] = Field(default_factory=list)
    gpu_quota: int | None = None
    max_priority: int = 0
    created_at: str


class WorkspaceBody(UserModel):
    pools: list[str] = Field(default_factory=list, max_length=256)
    gpu_quota: int | None = Field(default=None, ge=0, le=10_000_000)
    max_priority: int = Field(default=0, ge=-1_000_000, le=1_000_000)


class WorkspaceList(WireModel):
    workspaces: list[Workspace]


class TokenBody(UserModel):
    role: str = Field(pattern="^(admin|member|agent)$")
    workspace: str | None = Field(default=None, max_length=63)
    machine: str | None = Field(default=None, min_length=1, max_length=253)
    description: str = Field(default="", max_length=1024)
    labels: dict[LabelKey, LabelValue] = Field(
        default_factory=dict,
        max_length=MAX_LABELS,
        description="agent tokens only: labels admins give the machine now (`pool`, racks...), "
        "added to those it has",
    )


class TokenInfoView(WireModel):
    id: int
    role: str
    workspace: str | None = None
    machine: str | None = None
    description: str = ""
    created_at: str


class NewToken(WireModel):
    token: str = Field(description="the secret; shown this once, stored only hashed")
    info: TokenInfoView


class TokenList(WireModel):
    tokens: list[TokenInfoView]
