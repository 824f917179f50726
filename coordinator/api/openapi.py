"""The OpenAPI 3.1 document, built from the route table and the pydantic models."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from .routes import Route

_ERROR = {
    "type": "object",
    "required": ["error", "fields"],
    "properties": {
        "error": {"type": "string"},
        "fields": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"field": {"type": "string"}, "problem": {"type": "string"}},
            },
        },
    },
}


def document(routes: Sequence[Route], version: str) -> dict[str, Any]:
    models: list[type[BaseModel]] = []
    for route in routes:
        for model in (route.body, route.response):
            if model is not None and model not in models:
                models.append(model)
    _, defs = models_json_schema(
        [(m, "validation") for m in models], ref_template="#/components/schemas/{model}"
    )
    schemas = {**defs.get("$defs", {}), "Error": _ERROR}
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route)
    return {
        "openapi": "3.1.0",
        "info": {"title": "Astraeus coordinator", "version": version},
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": paths,
    }


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _operation(route: Route) -> dict[str, Any]:
    params = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in re.findall(r"{(\w+)}", route.path)
    ]
    params += [
        {
            "name": name,
            "in": "query",
            "required": False,
            "description": text,
            "schema": {"type": "string"},
        }
        for name, text in route.query.items()
    ]
    ok: dict[str, Any] = {"description": "OK"}
    if route.response is not None:
        ok["content"] = {"application/json": {"schema": _ref(route.response)}}
    error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    op: dict[str, Any] = {
        "summary": route.summary,
        "description": f"Who may call it: {route.who}.",
        "operationId": route.handler.__name__,
        "parameters": params,
        "responses": {
            str(route.status): ok,
            "400": {"description": "bad input: the field and the problem", **error},
            "401": {"description": "missing or unknown token", **error},
            "404": {"description": "not found, or not yours", **error},
            **{str(code): {"description": text, **error} for code, text in route.errors.items()},
            "500": {"description": "internal error; the coordinator logs the details", **error},
        },
    }
    if route.who == "anyone":
        op["security"] = []
    if route.body is not None:
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": _ref(route.body)}},
        }
    return op
