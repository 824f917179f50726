"""Machine reserved for work with these labels: +100, less 5 per label it requires."""

from __future__ import annotations

from typing import Final

from ..reserving import label_reservations, selects
from .term import ScoreInput

NAME: Final = "reserved_for_labels"
POINTS: Final = 100
PER_LABEL: Final = 5


def points(s: ScoreInput) -> int:
    # The `accepting` filter already let through only runs that select every label reservation that
    # holds; the fewer labels a reservation requires, the less specific it is, so the fewer points.
    best = 0
    for reservation in label_reservations(s.facts.snapshot.reservations, s.now):
        if selects(s.needs, reservation.labels):
            best = max(best, POINTS - PER_LABEL * len(reservation.labels))
    return best
