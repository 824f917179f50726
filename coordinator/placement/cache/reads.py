"""What a filter may read of its `Check`, by what it declares (`READS`), and a guard that holds it
to that.

A filter's verdict is kept where its declaration says (see `cache/__init__.py`), so a filter
that reads more than it declares gets verdicts kept for the wrong machines or runs: right on the
machine it was decided on, wrong on the others that share it. `READABLE` lists, as attribute
paths of `Check`, what each declaration allows:

- `Reads.MACHINE` verdicts are kept per ask's `static_key` for every machine, for as long as
  what the machine is does not change: such a filter reads what the machine is (never what
  live tasks hold there, which changes without a new frame), its network place, whether it is
  held for a run ahead (held machines are checked each time), the drives of the workspace's
  pools, the moment (kept per moment while a reservation starts or ends at a time), and of the
  run only `needs.STATIC_READS`, of which the static key is made.
- `Reads.RUN` and `Reads.FREE` verdicts are kept for one run per (a worker of the run already
  here, the machine's free kind): such a filter reads the run and its worker, and of the
  machine only what its free kind says (`kinds.describe`, what is free, the GPUs of the kind
  asked: `supply`); a `Reads.RUN` filter also where the run's workers are (`free.workers`).
  A `Reads.FREE` verdict on an idle cluster is kept with the frame for every run of the same
  ask, so it reads the ask, never the run's name, nor the moment. A run that pins GPU ids is
  checked machine by machine, so its `Reads.FREE` filters may read the machine's GPUs too.

`guarded(check, name, reads)` wraps a check so that a read outside these raises
`UndeclaredReadError`, naming the filter and the path. The engine never runs it (a proxy per read
would cost the hot path); `tests/placement/conftest.py` runs every filter of every placement test
through it.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any, Final, cast

from ..filters import READS_OF, Check, Filters, Reads
from ..needs import STATIC_READS
from ..rejection import Rejection

_FACTS: Final = frozenset(
    {
        "facts.name",
        "facts.report",
        "facts.up",
        "facts.site",
        "facts.rack",
        "facts.nvlink_domain",
        "facts.imex",
        "facts.gpus",
        "facts.gpu_by_id",
        "facts.local_drives",
        "facts.reachable_drives",
        "facts.reported_drives",
        "facts.snapshot.name",
        "facts.snapshot.state",
        "facts.snapshot.site",
        "facts.snapshot.labels",
        "facts.snapshot.cordon_reason",
        "facts.snapshot.reservations",
    }
)
"""What the machine is: its facts are read again whenever any of it changes."""

_ASK: Final = frozenset({"needs.ask", "needs.gpus", "needs.gpu_requests"})
"""The run's ask, without its name: what an idle evaluation kept for every run of an ask reads."""

READABLE: Final[dict[Reads, frozenset[str]]] = {
    Reads.MACHINE: _FACTS
    | {f"needs.{path}" for path in STATIC_READS}
    | {"place", "held", "known_drives", "now"},
    Reads.RUN: frozenset({"needs", "worker", "free.workers"}),
    Reads.FREE: _ASK
    | {f"needs.{path}" for path in STATIC_READS}
    | {
        "worker",
        "supply",
        "free.cpu_cores",
        "free.memory_bytes",
        "facts.report.cpu_cores",
        "facts.report.memory_bytes",
    },
}
"""Each declaration's readable paths of `Check`: a path allows everything below it."""

PINNED: Final = frozenset({"facts.gpu_by_id", "free.gpu_ids"})
"""What a `Reads.FREE` filter may read besides, for a run that pins GPU ids."""


class UndeclaredReadError(AttributeError):
    """A filter read what its `READS` does not declare."""


@cache
def readable(reads: Reads, pinned: bool) -> tuple[frozenset[str], frozenset[str]]:
    """The paths a filter declaring `reads` may read, and every path on the way to one."""
    allowed = READABLE[reads] | PINNED if pinned and reads is Reads.FREE else READABLE[reads]
    parts = [path.split(".") for path in allowed]
    on_the_way = frozenset(".".join(p[:end]) for p in parts for end in range(1, len(p)))
    return allowed, on_the_way


class _Guard:
    """One object of a check, as a filter may see it: a read of an allowed path gives the value
    itself; a read on the way to one gives the value guarded in turn; any other read raises."""

    __slots__ = ("_name", "_path", "_reads", "_rules", "_value")

    def __init__(
        self,
        value: object,
        path: str,
        rules: tuple[frozenset[str], frozenset[str]],
        name: str,
        reads: Reads,
    ) -> None:
        self._value, self._path, self._rules = value, path, rules
        self._name, self._reads = name, reads

    def __getattr__(self, attribute: str) -> Any:
        path = f"{self._path}.{attribute}" if self._path else attribute
        allowed, on_the_way = self._rules
        value = getattr(self._value, attribute)
        if path in allowed:
            return value
        if path in on_the_way:
            return (
                None if value is None else _Guard(value, path, self._rules, self._name, self._reads)
            )
        raise UndeclaredReadError(
            f"filter {self._name!r} reads {path}, which READS = Reads.{self._reads.name} does not "
            f"declare (it may read {', '.join(sorted(allowed))})"
        )


def guarded(check: Check, name: str, reads: Reads) -> Check:
    """`check` as the filter `name`, declaring `reads`, may see it."""
    rules = readable(reads, bool(check.needs.gpu_requests.ids))
    return cast(Check, _Guard(check, "", rules, name, reads))


def guarded_first_rejection(
    c: Check, filters: Filters, reads_of: Mapping[str, Reads] = READS_OF
) -> Rejection | None:
    """`filters.first_rejection`, each filter given the check as its `READS` allows."""
    for name, decide in filters:
        rejection = decide(guarded(c, name, reads_of[name]))
        if rejection is not None:
            return rejection
    return None
