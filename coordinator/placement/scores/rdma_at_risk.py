"""RDMA port at risk, for RDMA work: −25."""

from __future__ import annotations

from typing import Final

from .term import ScoreInput

NAME: Final = "rdma_port_at_risk"
POINTS: Final = -25


def points(s: ScoreInput) -> int:
    return POINTS if s.rdma_work and s.place.rdma_at_risk else 0
