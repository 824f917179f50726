"""Numbers as reason texts write them: whole numbers without a decimal point, memory in GiB."""

from __future__ import annotations

GIB = 1024**3


def number(value: float) -> str:
    """`8`, `12.5`: whole numbers stay whole."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def gib(value: int) -> str:
    """`120 GiB`, `0.5 GiB`."""
    return f"{number(round(value / GIB, 1))} GiB"
