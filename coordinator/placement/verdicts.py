"""`Verdicts`: a waiting run's verdict on each checked machine as the engine found it, made into
either wire form of the explanation on demand.

The engine records each machine's first rejection (`explanation.pending`); turning 20,000 of them
into the guide's per-machine JSON (`full`: one validated entry per machine) costs more than
finding them. A scheduler pass stores that form; a dry run answered grouped by reason
(`explain=grouped`) needs only the counts, a few names and the closest machines, so `grouped`
counts the rejections directly and the per-machine list is never made. Both forms say exactly
the same: `grouped()` equals `shared.explanation.grouped(full(), groups())` (tested).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from astraeus.shared import MachineState, PendingExplanation
from astraeus.shared.explanation import (
    CLOSEST,
    SAMPLE,
    GroupedExplanation,
    ReasonCount,
    RejectionGroup,
    grouped,
)

from .rejection import Rejection

UP, DOWN = MachineState.UP, MachineState.DOWN


class Verdicts:
    """Each checked machine (in name order), whether it is Up, and its rejection; the closest
    machine; when. The forms made are kept. Pickled (from the pass worker to the service) as
    the forms already made, when both are: the service stores them as they are."""

    def __init__(
        self,
        names: Sequence[str],
        up: Sequence[bool],
        rejections: Sequence[Rejection],
        closest: str | None,
        evaluated_at: datetime,
    ) -> None:
        self._names, self._up, self._rejections = names, up, rejections
        self._closest, self._at = closest, evaluated_at
        self._full: PendingExplanation | None = None
        self._groups: list[RejectionGroup] | None = None

    def full(self) -> PendingExplanation:
        """The guide's explanation: every machine with its reason."""
        if self._full is None:
            ready = sum(self._up)
            machines = zip(self._names, self._up, self._rejections, strict=True)
            nodes = [
                {"name": name, "state": UP if is_up else DOWN, "reasons": [rejection.reason]}
                for name, is_up, rejection in machines
            ]
            # Plain dicts validated in one call: one model per machine costs more.
            self._full = PendingExplanation.model_validate(
                {
                    "checked_nodes": len(self._names),
                    "ready_nodes": ready,
                    "down_nodes": len(self._names) - ready,
                    "closest": self._closest,
                    "nodes": nodes,
                    "evaluated_at": self._at,
                }
            )
        return self._full

    def groups(self) -> list[RejectionGroup]:
        """The machines by filter, code and room, in the order each group first appears."""
        if self._groups is None:
            found: dict[tuple[str, str, bool], list[str]] = {}
            for name, rejection in zip(self._names, self._rejections, strict=True):
                key = (rejection.filter, rejection.code, rejection.room)
                found.setdefault(key, []).append(name)
            self._groups = [
                RejectionGroup(filter=name, code=code, room=room, machines=machines)
                for (name, code, room), machines in found.items()
            ]
        return self._groups

    def grouped(self) -> GroupedExplanation:
        """The explanation by reason: counts, the first few machines of each, the closest."""
        if self._full is not None and self._groups is not None and not self._names:
            return grouped(self._full, self._groups)
        counts: dict[tuple[str, bool], tuple[list[str], Rejection]] = {}
        sizes: dict[tuple[str, bool], int] = {}
        room: list[str] = []
        for name, is_up, rejection in zip(self._names, self._up, self._rejections, strict=True):
            key = (rejection.reason, is_up)
            if key in sizes:
                sizes[key] += 1
                names = counts[key][0]
                if len(names) < SAMPLE:
                    names.append(name)
            else:
                sizes[key] = 1
                counts[key] = ([name], rejection)
            # Machines are in name order: the first few are the smallest names.
            if rejection.room and len(room) < CLOSEST - 1 and name != self._closest:
                room.append(name)
        reasons = [
            ReasonCount(
                reason=text,
                state=UP if is_up else DOWN,
                filter=first.filter,
                code=first.code,
                room=first.room,
                count=sizes[(text, is_up)],
                machines=names,
            )
            for (text, is_up), (names, first) in counts.items()
        ]
        reasons.sort(key=lambda group: (-group.count, group.reason, group.state))
        ready = sum(self._up)
        closest = [self._closest, *room] if self._closest is not None else []
        return GroupedExplanation(
            checked_nodes=len(self._names),
            ready_nodes=ready,
            down_nodes=len(self._names) - ready,
            closest=self._closest,
            closest_machines=closest,
            reasons=reasons,
            evaluated_at=self._at,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Verdicts):
            return NotImplemented
        return self.full() == other.full() and self.groups() == other.groups()

    __hash__ = None  # type: ignore[assignment]  # mutable cache; equal by content

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if self._full is not None and self._groups is not None:
            state.update(_names=(), _up=(), _rejections=())
        return state

    def __repr__(self) -> str:
        return f"Verdicts({len(self._names)} machines, closest={self._closest!r})"
