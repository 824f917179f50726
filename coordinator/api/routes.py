"""The route table: each route's handler and what the OpenAPI document says about it."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel

from .errors import Handler


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    handler: Handler
    summary: str
    who: str
    """Who may call it: `anyone`, `admin`, `member` (members and admins), `agent`."""
    body: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    status: int = 200
    query: dict[str, str] = field(default_factory=dict)
    """Query parameters and what each does."""
    errors: dict[int, str] = field(default_factory=dict)
    """Error statuses beyond those every route may answer, and when."""
