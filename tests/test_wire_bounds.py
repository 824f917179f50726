"""Every integer a request body may carry is bounded to what SQLite stores (signed 64 bits)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from astraeus.coordinator.api import all_routes
from astraeus.coordinator.api.openapi import document
from astraeus.shared.base import INT64_MAX

DOC = document(all_routes(), "test")
SCHEMAS = DOC["components"]["schemas"]


def _bodies() -> list[str]:
    found = []
    for ops in DOC["paths"].values():
        for op in ops.values():
            ref = op.get("requestBody", {}).get("content", {}).get("application/json", {})
            name = ref.get("schema", {}).get("$ref", "").rsplit("/", 1)[-1]
            if name and name not in found:
                found.append(name)
    return found


LOW = ("minimum", "exclusiveMinimum", "ge", "gt")
HIGH = ("maximum", "exclusiveMaximum", "le", "lt")
"""Pydantic writes a union's bounds as `ge`/`le` beside its `anyOf` (and enforces them)."""


def _integers(
    schema: Any, path: str, seen: set[str], outer: dict[str, Any] | None = None
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every integer schema reachable from `schema` with the bounds that apply to it (a union's
    bounds sit beside its `anyOf`), and a path for the failure message."""
    if isinstance(schema, list):
        for item in schema:
            yield from _integers(item, path, seen, outer)
        return
    if not isinstance(schema, dict):
        return
    ref = schema.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        if name not in seen:
            seen.add(name)
            yield from _integers(SCHEMAS[name], name, seen)
        return
    bounds = {**(outer or {}), **{k: schema[k] for k in (*LOW, *HIGH) if k in schema}}
    if schema.get("type") == "integer":
        yield path, bounds
    for key, value in schema.items():
        if key == "properties":
            for field, sub in value.items():
                yield from _integers(sub, f"{path}.{field}", seen)
        elif key in ("anyOf", "oneOf", "allOf"):
            yield from _integers(value, path, seen, bounds)
        elif isinstance(value, dict | list):
            yield from _integers(value, path, seen)


def test_every_integer_in_a_request_body_is_bounded() -> None:
    """No request body accepts an integer SQLite cannot store (an update `seq` of 2**64 was
    a plain-text 500)."""
    unbounded = []
    seen: set[str] = set()
    for body in _bodies():
        for path, schema in _integers({"$ref": f"#/components/schemas/{body}"}, body, seen):
            low = next((schema[k] for k in LOW if k in schema), None)
            high = next((schema[k] for k in HIGH if k in schema), None)
            if low is None or high is None or low < -INT64_MAX - 1 or high > INT64_MAX:
                unbounded.append(path)
    assert unbounded == []
