"""Turn pydantic's errors into sentences that name the field and say what to change."""

import difflib
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Union

from pydantic import BaseModel, ValidationError


@dataclass(frozen=True)
class FieldError:
    field: str
    problem: str

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "problem": self.problem}

    def __str__(self) -> str:
        return f"{self.field}: {self.problem}" if self.field else self.problem


def invalid_body(model: type[BaseModel]) -> str:
    """The headline of a refused request body, `invalid WorkspaceBody`: the API answers it and
    `astra` says it before sending, from the same model."""
    return f"invalid {model.__name__}"


def field_errors(model: type[BaseModel], exc: ValidationError) -> list[FieldError]:
    """One `FieldError` per problem, dotted field paths, unknown fields with a suggestion."""
    return [_one(model, error) for error in exc.errors(include_url=False)]


def describe(model: type[BaseModel], exc: ValidationError) -> str:
    """All problems on one line each, for a CLI or a log: a pattern said in words."""
    return "\n".join(
        str(FieldError(error.field, in_words(error.problem))) for error in field_errors(model, exc)
    )


PATTERN_WORDS = {
    r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$": "use lowercase letters, digits and '-', up to 63"
    " characters, starting and ending with a letter or digit",
    r"^[A-Za-z_][A-Za-z0-9_]*$": "use letters, digits and '_', not starting with a digit",
    r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$": "use letters, digits, '.', '_' and '-', up to 63"
    " characters, starting with a letter or digit",
    r"^(/[A-Za-z0-9._@+-]+)+$": "start with '/': give an absolute path",
}
"""What a value that does not match a pattern should look like, said as the console says it
(`coordinator/console/words.js` SHAPES): the API's text names the pattern, for programs."""

_MISMATCH = re.compile(r"^('.*') does not match (.+)$", re.DOTALL)


def in_words(problem: str) -> str:
    """`'Bad_Name' does not match ^[a-z0-9]…$` as `'Bad_Name' is not allowed: use lowercase
    letters, …` for a person (a CLI); any other problem as it is."""
    found = _MISMATCH.match(problem)
    words = PATTERN_WORDS.get(found.group(2)) if found else None
    return f"{found.group(1)} is not allowed: {words}" if found and words else problem


def _one(model: type[BaseModel], error: Any) -> FieldError:
    loc = tuple(error.get("loc", ()))
    path = _dotted(loc)
    kind = error.get("type", "")
    if kind == "extra_forbidden":
        return FieldError(path, _unknown_field(model, loc))
    if kind == "missing":
        return FieldError(path, "is required")
    if kind == "too_long" and error.get("ctx", {}).get("actual_length") is not None:
        ctx = error["ctx"]
        return FieldError(
            path, f"must have at most {ctx['max_length']} items, got {ctx['actual_length']}"
        )
    if kind == "finite_number":
        return FieldError(path, "must be a finite number, not NaN or infinity")
    if kind in ("enum", "literal_error"):
        allowed = error.get("ctx", {}).get("expected", "")
        return FieldError(path, f"{error.get('input')!r} is not allowed; use one of {allowed}")
    bound = _BOUNDS.get(kind)
    if bound is not None:
        limit = error.get("ctx", {}).get(bound[1])
        return FieldError(path, f"must be {bound[0]} {limit}, got {error.get('input')!r}")
    if kind == "string_pattern_mismatch":
        pattern = error.get("ctx", {}).get("pattern")
        return FieldError(path, f"{error.get('input')!r} does not match {pattern}")
    message = str(error.get("msg", "is not valid"))
    message = message.removeprefix("Value error, ")
    return FieldError(path, message)


_BOUNDS = {
    "greater_than_equal": ("at least", "ge"),
    "greater_than": ("more than", "gt"),
    "less_than_equal": ("at most", "le"),
    "less_than": ("less than", "lt"),
}


def _dotted(loc: tuple[Any, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts)


def _unknown_field(model: type[BaseModel], loc: tuple[Any, ...]) -> str:
    name = str(loc[-1])
    known = _fields_at(model, loc[:-1])
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if close:
        return f"unknown field; did you mean {close[0]}?"
    if known:
        return f"unknown field; allowed here: {', '.join(sorted(known))}"
    return "unknown field"


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The field names of the model found by walking `loc` from `model`."""
    current: Any = model
    for item in loc:
        found = _model_in(current)
        if found is None:
            return []
        # A list index keeps the item model that _model_in found.
        current = found.model_fields[item].annotation if item in found.model_fields else found
    found = _model_in(current)
    return list(found.model_fields) if found is not None else []


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside an annotation such as `X | None` or `list[X]`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType, list, dict, tuple, typing.Annotated):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None
