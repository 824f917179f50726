"""Byte counts as people read them: `8 GiB`, `88.8 TiB`, never `9.31323e+07 GiB`. Standard
library only; the agent's tables and log lines and the coordinator's reasons both use it."""

UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def size_text(value: int) -> str:
    """The largest binary unit in which `value` is at least 1, with at most one decimal (none
    when it is whole): `0 B`, `512 MiB`, `1.5 GiB`, `88.8 TiB`."""
    if value < 0:
        raise ValueError(f"a size is not negative: {value}")
    number, unit = float(value), 0
    while unit < len(UNITS) - 1 and round(number, 1) >= 1024:
        number, unit = number / 1024, unit + 1
    shown = round(number, 1)
    text = str(int(shown)) if shown.is_integer() else f"{shown:.1f}"
    return f"{text} {UNITS[unit]}"
