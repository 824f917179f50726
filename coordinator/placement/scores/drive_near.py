"""A drive is near (same rack, fabric or NVLink domain): +15 with RDMA at both ends, else +10."""

from __future__ import annotations

from typing import Final

from .term import Home, ScoreInput

NAME: Final = "drives_near"
NEAR_RDMA: Final = 15
NEAR: Final = 10


def points(s: ScoreInput) -> int:
    total = 0
    for drive in s.needs.ask.drives:
        if drive.name in s.facts.local_drives or not s.drive_homes:
            continue
        homes = s.drive_homes.get(drive.name, ())
        total += max((_near(s, home) for home in homes), default=0)
    return total


def _near(s: ScoreInput, home: Home) -> int:
    facts, place = s.facts, s.place
    if home.site != facts.site:
        return 0
    same = (
        (facts.rack is not None and facts.rack == home.rack)
        or (place.fabric is not None and place.fabric == home.fabric)
        or (facts.nvlink_domain is not None and facts.nvlink_domain == home.nvlink_domain)
    )
    if not same:
        return 0
    return NEAR_RDMA if home.rdma and place.link is not None else NEAR
