"""Request bodies, built from `shared`'s models: a bad value is refused before it is sent, by
the model the API reads the body with and in the API's own words (`invalid WorkspaceBody` and a
line per field)."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from astraeus.shared.validation import field_errors, invalid_body

from .errors import CliError, Exit, refusal

ModelT = TypeVar("ModelT", bound=BaseModel)


def body(model: type[ModelT], **fields: Any) -> ModelT:
    """`model` of `fields`, or a `CliError` (exit 2) naming each field that is wrong."""
    try:
        return model.model_validate(fields)
    except ValidationError as exc:
        problems = [(error.field, error.problem) for error in field_errors(model, exc)]
        raise CliError(refusal(invalid_body(model), problems), Exit.USAGE) from None
