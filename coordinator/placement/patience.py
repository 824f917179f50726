"""`topology.patience_seconds`: wait for a tighter rung that could become free, for a while."""

from __future__ import annotations

import math
from datetime import datetime

from .needs import Needs


def remaining(needs: Needs, now: datetime) -> int | None:
    """Whole seconds of patience left (rounded up), or None when there is none."""
    topology = needs.ask.topology
    if topology is None or not topology.patience_seconds:
        return None
    started = needs.run.first_evaluated_at or now
    left = topology.patience_seconds - (now - started).total_seconds()
    return math.ceil(left) if left > 0 else None


def waits_for(seconds: int, rung_title: str) -> str:
    return f"waits up to {seconds} s more for {rung_title} (topology.patience_seconds)"
