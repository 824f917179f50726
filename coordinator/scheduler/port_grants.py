"""Rendezvous ports, a resource held like GPUs: worker 0 of each run of several workers gets a
port from the coordinator's `rendezvous_ports` range that no other live task holds on its
machine, nor one its agent found in use lately. A world of one (a one-worker run, an array
element) holds none: its agent gives it a free port outside the range.

An agent that finds worker 0's port in use reports every port of the range in use there at once
(`AgentReport.ports_in_use`), so the next port given is a free one, not merely the next one.

The scheduler gives ports after each pass's commit (`give_ports`); the store keeps them (the
task's `port`, unique per machine among tasks that hold resources) and never chooses one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property

from astraeus.coordinator.settings import PortRange
from astraeus.coordinator.store.db import Database
from astraeus.coordinator.store.port_rows import held_ports, needing_ports, set_ports
from astraeus.shared import PortSpan

log = logging.getLogger(__name__)

BUSY_FOR = timedelta(minutes=10)
"""A port an agent found busy is not given again on its machine for this long."""
MAX_BUSY_PER_MACHINE = 4096
"""Busy ports remembered per machine: a hostile agent cannot grow this without bound."""


def choose_port(ports: PortRange, taken: Collection[int]) -> int | None:
    """The lowest port of the range not in `taken`; None when every one is."""
    return next((port for port in ports.ports() if port not in taken), None)


@dataclass
class Ports:
    """The range, and the ports agents found busy lately, by machine (memory only: after a
    restart a busy port is found busy again once, and another given)."""

    ports: PortRange
    busy: dict[str, dict[int, datetime]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    """Reports mark ports busy on the event loop while `give` reads them on the writer thread."""

    @cached_property
    def span(self) -> PortSpan:
        """The range as the report reply says it to agents."""
        return PortSpan(first=self.ports.first, last=self.ports.last)

    def found_busy(self, machine: str, port: int, now: datetime) -> None:
        self.found_in_use(machine, [PortSpan(first=port, last=port)], now)

    def found_in_use(self, machine: str, spans: Sequence[PortSpan], now: datetime) -> int:
        """Remember every port of `spans` within the range as busy on `machine` (what its agent
        found in use there), the lowest `MAX_BUSY_PER_MACHINE` at most; returns how many."""
        first, last = self.ports.first, self.ports.last
        found: set[int] = set()
        for span in spans:
            low, high = max(first, span.first), min(last, span.last)
            if low <= high and len(found) < MAX_BUSY_PER_MACHINE:
                found.update(range(low, min(high, low + MAX_BUSY_PER_MACHINE) + 1))
        chosen = sorted(found)[:MAX_BUSY_PER_MACHINE]
        until = now + BUSY_FOR
        with self._lock:
            marks = self.busy.setdefault(machine, {})
            marks.update(dict.fromkeys(chosen, until))
            if len(marks) > MAX_BUSY_PER_MACHINE:  # the latest marks stay
                kept = sorted(marks.items(), key=lambda mark: mark[1])[-MAX_BUSY_PER_MACHINE:]
                self.busy[machine] = dict(kept)
        return len(chosen)

    def forget(self, machine: str) -> None:
        """A forgotten machine's busy ports: a machine of that name later is a new one."""
        with self._lock:
            self.busy.pop(machine, None)

    def busy_on(self, machine: str, now: datetime) -> set[int]:
        with self._lock:
            marks = self.busy.get(machine, {})
            for port in [p for p, until in marks.items() if until <= now]:
                del marks[port]
            return set(marks)

    def give(self, database: Database, now: datetime) -> int:
        """A port for every worker 0 of several placed without one; returns how many were
        given."""
        needs = needing_ports(database)
        if not needs:
            return 0
        held = held_ports(database, {need.machine for need in needs})
        given: list[tuple[int, int]] = []
        for need in needs:
            taken = held.setdefault(need.machine, set()) | self.busy_on(need.machine, now)
            port = choose_port(self.ports, taken)
            if port is None:
                log.warning(
                    "task %s on %s waits for a rendezvous port: all of %d-%d are held or busy",
                    need.task,
                    need.machine,
                    self.ports.first,
                    self.ports.last,
                )
                continue
            held[need.machine].add(port)
            given.append((need.id, port))
        return set_ports(database, given)
