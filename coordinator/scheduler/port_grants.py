"""Rendezvous ports, a resource held like GPUs: each run's worker 0 (each array element, its own
world of one) gets a port from the coordinator's `rendezvous_ports` range that no other live task
holds on its machine, nor one its agent found busy lately.

The scheduler gives ports after each pass's commit (`give_ports`); the store keeps them (the
task's `port`, unique per machine among tasks that hold resources) and never chooses one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from astraeus.coordinator.settings import PortRange
from astraeus.coordinator.store.db import Database
from astraeus.coordinator.store.port_rows import held_ports, needing_ports, set_ports

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

    def found_busy(self, machine: str, port: int, now: datetime) -> None:
        with self._lock:
            marks = self.busy.setdefault(machine, {})
            if len(marks) >= MAX_BUSY_PER_MACHINE:
                marks.pop(min(marks, key=marks.__getitem__))
            marks[port] = now + BUSY_FOR

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
        """A port for every worker 0 placed without one; returns how many were given."""
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
