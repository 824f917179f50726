"""`astra validate FILE.json`: check a run spec without a coordinator."""

from __future__ import annotations

import sys

from pydantic import ValidationError

from astraeus.shared import RunSpec, describe

from .errors import Exit


def validate(path: str) -> int:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        print(f"astra: cannot read {path}: {exc.strerror}", file=sys.stderr)
        return Exit.USAGE
    try:
        spec = RunSpec.model_validate_json(text)
    except ValidationError as exc:
        print(f"astra: {path} is not a valid run:\n{describe(RunSpec, exc)}", file=sys.stderr)
        return Exit.USAGE  # as `run -f` says of the same file
    print(f"{spec.name}: valid")
    return Exit.OK
