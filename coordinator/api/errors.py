"""JSON errors: `{"error": ..., "fields": [{"field", "problem"}]}`, and body parsing into models."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from astraeus.coordinator.store.faults import StorageError
from astraeus.shared import FieldError, field_errors
from astraeus.shared.validation import invalid_body

log = logging.getLogger(__name__)

ModelT = TypeVar("ModelT", bound=BaseModel)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

INTERNAL = "internal error: the coordinator's log has the details"


def error_response(
    status: int,
    error: str,
    fields: list[FieldError] | None = None,
    headers: dict[str, str] | None = None,
) -> web.Response:
    body: dict[str, Any] = {"error": error, "fields": [f.as_dict() for f in fields or []]}
    return web.json_response(body, status=status, headers=headers)


class ApiError(Exception):
    """Raised by handlers; the middleware answers it as a JSON error."""

    def __init__(
        self,
        status: int,
        error: str,
        fields: list[FieldError] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(error)
        self.status = status
        self.error = error
        self.fields = fields or []
        self.headers = headers


def fail(status: int, error: str, field: str | None = None, problem: str | None = None) -> NoReturn:
    fields = [FieldError(field, problem or error)] if field is not None else None
    raise ApiError(status, error, fields)


def not_found(kind: str, name: str) -> NoReturn:
    fail(404, f"no {kind} named {name!r}")


def row_id(raw: str) -> int | None:
    """A row id from a path: ASCII digits that SQLite can hold, else None (`²` is a digit to
    `str.isdigit`, and 2**64 overflows SQLite)."""
    if raw.isascii() and raw.isdigit() and len(raw) <= 18:
        return int(raw)
    return None


async def read_model(request: web.Request, model: type[ModelT]) -> ModelT:
    """The request body as `model`, or a 400/413/415 naming what is wrong."""
    if request.content_type != "application/json":
        fail(415, "send a JSON body with Content-Type: application/json")
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        fail(413, f"request body is larger than {request.client_max_size} bytes")
    try:
        # Straight from bytes: pydantic parses and validates in one step, which is what keeps
        # agents' reports cheap.
        return model.model_validate_json(raw)
    except ValidationError as exc:
        kinds = {error["type"] for error in exc.errors()}
        if "json_invalid" in kinds:
            fail(400, "body is not valid JSON", "body", "is not valid JSON")
        if any(error["type"] == "model_type" and not error["loc"] for error in exc.errors()):
            fail(400, "body must be a JSON object", "body", "must be a JSON object")
        raise ApiError(400, invalid_body(model), field_errors(model, exc)) from None


MAX_URL_BYTES = 8192
"""The longest request target (path and query) answered; a longer one gets the JSON 414."""

MAX_REQUEST_LINE = 65536
"""The server runner's `max_line_size`: aiohttp's own limit on the request line (8 KiB) answers
in plain text, before any middleware; raised, so that a URL past `MAX_URL_BYTES` reaches
`json_errors` and is refused in the documented JSON. (Past 64 KiB aiohttp still answers.)"""

RETRY_AFTER = 5
"""Seconds a client is told to wait (`Retry-After`) while the database takes no writes."""


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Answer `ApiError`, aiohttp's HTTP errors (404, 405, 413), a storage fault as 503
    (`database is not writable: disk full`: nothing of the request was written) and anything
    unexpected as 500 (logged with its traceback), all as the documented JSON error."""
    try:
        if len(request.raw_path) > MAX_URL_BYTES:
            fail(414, f"the URL is {len(request.raw_path)} bytes long; at most {MAX_URL_BYTES}")
        return await handler(request)
    except ApiError as exc:
        return error_response(exc.status, exc.error, exc.fields, exc.headers)
    except StorageError as exc:
        response = error_response(503, str(exc))
        response.headers["Retry-After"] = str(RETRY_AFTER)
        return response
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(exc.status, exc.reason)
    except Exception:
        log.exception("%s %s failed", request.method, request.path)
        return error_response(500, INTERNAL)
