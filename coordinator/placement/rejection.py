"""Why a machine is out: data, not prose. Only `explain` turns rejections into a pending reason."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Rejection:
    """The first filter that keeps a machine out, with its stable text and the numbers behind it.

    `code` names the reason's kind within its filter (`InsufficientGPUs`), so readers of the
    explanation tell reasons apart by data, never by their words. `room` is true when the machine
    falls short only on cores, memory or GPUs that other runs hold: it may clear by itself, and
    such a machine can be the `closest`. `need` and `have` say by how much (in the filter's own
    unit), so the closest machine is the one with the most of its need. Built with keywords
    only (`room=True, need=8, have=4`), so each number says what it is.
    """

    filter: str
    reason: str
    room: bool = False
    need: float = 0
    have: float = 0
    code: str
