"""Write docs/api-reference.md from the coordinator's OpenAPI document.

    .venv/bin/python scripts/api_reference.py           # rewrite docs/api-reference.md
    .venv/bin/python scripts/api_reference.py --check   # exit 1 if the file is out of date

Every route (who may call it, its parameters, body and answers), then every schema with its
fields. The document's version is left out, so the file changes only when the API does.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from astraeus.coordinator.api.app import all_routes
from astraeus.coordinator.api.openapi import document

OUTPUT = Path(__file__).resolve().parent.parent / "docs" / "api-reference.md"
COMMAND = ".venv/bin/python scripts/api_reference.py"
METHODS = ("get", "put", "post", "delete")
Schema = dict[str, Any]


def openapi() -> Schema:
    return document(all_routes(), "reference")


def render(doc: Schema) -> str:
    """The whole reference as Markdown."""
    lines = [
        "# API reference",
        "",
        "Generated from the coordinator's OpenAPI document (`GET /api/v1/openapi.json`) by",
        f"`{COMMAND}`: do not edit it by hand. `docs/api.md` tells the story;",
        "this lists every route and every field. Every route but `/healthz` needs",
        "`Authorization: Bearer <token>`; an admin route called by a member answers 403.",
        "",
        "## Routes",
        "",
        "| route | who | what |",
        "| --- | --- | --- |",
    ]
    operations = list(_operations(doc))
    for method, path, op in operations:
        link = _anchor(f"{method} {path}")
        lines.append(f"| [`{method} {path}`](#{link}) | {_who(op)} | {op['summary']} |")
    lines.append("")
    for method, path, op in operations:
        lines += _route(method, path, op)
    lines += ["## Schemas", ""]
    for name, schema in sorted(doc["components"]["schemas"].items()):
        lines += _schema(name, schema)
    return "\n".join(lines).rstrip() + "\n"


def _operations(doc: Schema) -> list[tuple[str, str, Schema]]:
    found = []
    for path, item in doc["paths"].items():  # the route table's order
        for method in METHODS:
            if method in item:
                found.append((method.upper(), path, item[method]))
    return found


def _who(op: Schema) -> str:
    return str(op["description"]).removeprefix("Who may call it: ").rstrip(".")


def _anchor(text: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces as dashes."""
    kept = "".join(c for c in text.lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


def _route(method: str, path: str, op: Schema) -> list[str]:
    lines = [f"### {method} {path}", "", f"{op['summary']}. Who may call it: {_who(op)}.", ""]
    params = op.get("parameters", [])
    if params:
        lines += ["| parameter | in | what |", "| --- | --- | --- |"]
        for p in params:
            what = p.get("description", "required" if p["required"] else "")
            lines.append(f"| `{p['name']}` | {p['in']} | {_cell(what)} |")
        lines.append("")
    body = op.get("requestBody")
    if body:
        lines += [f"Body: {_type(body['content']['application/json']['schema'])}.", ""]
    errors = []
    for status, answer in op["responses"].items():
        content = answer.get("content", {}).get("application/json")
        shown = _type(content["schema"]) if content else "no body"
        if status.startswith("2"):
            lines.append(f"- Answer: {status}, {shown}.")
        else:
            errors.append(f"{status} {answer['description']}")
    if errors:
        lines.append(f"- Errors ([`Error`](#error)): {'; '.join(errors)}.")
    return [*lines, ""]


def _schema(name: str, schema: Schema) -> list[str]:
    lines = [f"### {name}", ""]
    if schema.get("description"):
        lines += [_cell(schema["description"]), ""]
    if "enum" in schema:
        return [*lines, "One of: " + ", ".join(f"`{v}`" for v in schema["enum"]) + ".", ""]
    properties = schema.get("properties", {})
    if not properties:
        return [*lines, f"Type: {_type(schema)}.", ""]
    required = set(schema.get("required", []))
    lines += ["| field | type | required | default | what |", "| --- | --- | --- | --- | --- |"]
    for field, prop in properties.items():
        default = f"`{_json(prop['default'])}`" if "default" in prop else ""
        lines.append(
            f"| `{field}` | {_type(prop)} | {'yes' if field in required else 'no'} | "
            f"{_cell(default)} | {_cell(_what(prop))} |"
        )
    return [*lines, ""]


LIMITS = {
    "minimum": "at least {}",
    "exclusiveMinimum": "more than {}",
    "maximum": "at most {}",
    "minLength": "length at least {}",
    "maxLength": "length at most {}",
    "minItems": "items at least {}",
    "maxItems": "items at most {}",
    "pattern": "matches `{}`",
}


def _what(prop: Schema) -> str:
    """The field's description, then its limits (`length at most 63`)."""
    found = [prop, *prop.get("anyOf", [])]
    limits = [text.format(s[key]) for s in found for key, text in LIMITS.items() if key in s]
    parts = [str(prop.get("description", "")), "; ".join(limits)]
    return ". ".join(part for part in parts if part)


def _type(schema: Schema) -> str:
    """A schema as a short type: a link to a named schema, `list of …`, `map of …`, `a or b`."""
    if "$ref" in schema:
        name = str(schema["$ref"]).rsplit("/", 1)[1]
        return f"[`{name}`](#{_anchor(name)})"
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return _type(schema["allOf"][0])
    if "anyOf" in schema or "oneOf" in schema:
        options: list[Schema] = schema.get("anyOf") or schema.get("oneOf") or []
        kinds = [_type(option) for option in options]
        return " or ".join(dict.fromkeys(kinds))
    if "const" in schema:
        return f"`{_json(schema['const'])}`"
    if "enum" in schema:
        return " or ".join(f"`{_json(v)}`" for v in schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        return f"list of {_type(schema.get('items', {}))}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"map of string to {_type(schema['additionalProperties'])}"
    if kind == "string" and "format" in schema:
        return f"string ({schema['format']})"
    return str(kind or "any")


def _json(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is out of date")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    text = render(openapi())
    if args.check:
        current = args.output.read_text() if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is out of date: run {COMMAND}", file=sys.stderr)
            return 1
        return 0
    args.output.write_text(text)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
