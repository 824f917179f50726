"""Model bases: strict for what users submit, lenient for what agents report.

Both refuse NaN and infinity (`1e999` parses as infinity): SQLite stores neither, and a number
that cannot be stored or compared must never reach a pass. Integers are bounded per field to
what SQLite holds (`INT64_MAX`); `tests/test_wire_bounds.py` checks every one in the OpenAPI
document."""

from typing import Annotated, Final

from pydantic import AfterValidator, BaseModel, ConfigDict, StringConstraints

INT64_MAX: Final = 2**63 - 1
"""The largest integer SQLite stores."""

NUL_PROBLEM: Final = "must not contain a NUL byte"


def no_nul(value: str) -> str:
    """The value, or a ValueError when it holds a NUL byte."""
    if "\x00" in value:
        raise ValueError(NUL_PROBLEM)
    return value


DnsLabel = Annotated[str, StringConstraints(pattern=r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")]
"""A DNS label, as Kubernetes names are: lower-case letters, digits and '-', at most 63."""

ProcessText = Annotated[str, AfterValidator(no_nul)]
"""A string that reaches a process (its command, environment, image): the kernel ends C strings
at a NUL byte, so one inside would run something other than what was asked."""


class UserModel(BaseModel):
    """Something a person writes: unknown fields are errors, so typos never pass silently."""

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, frozen=False, allow_inf_nan=False
    )


class WireModel(BaseModel):
    """Something a program sends: unknown fields are ignored, so agents and coordinators can be
    upgraded one at a time."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)
