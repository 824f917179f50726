"""When a reservation holds, and whether a run selects a label reservation."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime

from .model import Reservation
from .needs import Needs


def active(reservation: Reservation, now: datetime) -> bool:
    """The reservation holds at `now`: started (or open-ended) and not yet over."""
    started = reservation.starts_at is None or reservation.starts_at <= now
    return started and (reservation.ends_at is None or now < reservation.ends_at)


def selects(needs: Needs, labels: dict[str, str]) -> bool:
    """The run's `match_labels` include every label of a reservation."""
    wanted = needs.match_labels
    return all(wanted.get(key) == value for key, value in labels.items())


def label_reservations(reservations: Sequence[Reservation], now: datetime) -> Iterator[Reservation]:
    """The machine's label reservations that hold now."""
    return (r for r in reservations if r.labels and active(r, now))
