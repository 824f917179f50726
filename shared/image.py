"""Container image references, checked against the OCI distribution grammar before any runtime
sees them, so an `image` can never be read as one of the runtime's own flags."""

import re
from typing import Annotated

from pydantic import AfterValidator

_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|-+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])"
_NAME = rf"(?:{_HOST}(?::[0-9]+)?/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
REFERENCE = re.compile(rf"({_NAME})(?::{_TAG})?(?:@{_DIGEST})?", re.ASCII)
"""`[registry[:port]/]path[:tag][@digest]`, as `distribution/reference` parses it."""
NAME_MAX = 255
"""The longest repository name (registry and path) the grammar allows."""
EXAMPLE = "nvcr.io/nvidia/pytorch:24.08-py3"


def check_image(image: str) -> str:
    """`image` itself when it is an OCI image reference; a ValueError saying why otherwise."""
    found = REFERENCE.fullmatch(image)
    if found is None:
        raise ValueError(
            f"{image[:200]!r} is not an OCI image reference: use "
            f"[registry/]name[:tag][@digest], e.g. {EXAMPLE}"
        )
    if len(found.group(1)) > NAME_MAX:
        raise ValueError(f"the repository name is longer than {NAME_MAX} characters")
    return image


OciImage = Annotated[str, AfterValidator(check_image)]
"""A `str` field that holds an OCI image reference."""
