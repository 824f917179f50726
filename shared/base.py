"""Model bases: strict for what users submit, lenient for what agents report."""

from pydantic import BaseModel, ConfigDict


class UserModel(BaseModel):
    """Something a person writes: unknown fields are errors, so typos never pass silently."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)


class WireModel(BaseModel):
    """Something a program sends: unknown fields are ignored, so agents and coordinators can be
    upgraded one at a time."""

    model_config = ConfigDict(extra="ignore")
