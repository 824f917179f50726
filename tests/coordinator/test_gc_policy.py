"""The scheduler's collections (`scheduler/gc_policy.py`): garbage made between passes is freed
at each settle, what lives is frozen, and the whole heap is walked only once it has grown."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from astraeus.coordinator.scheduler import gc_policy, pass_worker, worker_pool
from astraeus.coordinator.scheduler.compute import PassInputs, PassState
from astraeus.coordinator.scheduler.gc_policy import GROWTH, GcPolicy
from astraeus.coordinator.scheduler.pass_worker import worker_pass

from .fakes import START


class _Cycle:
    me: object = None


def _cycle() -> tuple[_Cycle, list[object]]:
    """A cycle, and a list its only referrer outside the cycle can be dropped from: a test
    keeps no name bound to it (a frame's reference would keep it alive)."""
    cycle = _Cycle()
    cycle.me = cycle
    return cycle, [cycle]


def _seen(cls: type) -> int:
    """Instances of `cls` the collector sees (not frozen)."""
    return sum(1 for o in gc.get_objects() if type(o) is cls)


def _instances(cls: type) -> int:
    """Instances of `cls`, frozen or not (everything is frozen again after counting)."""
    gc.unfreeze()
    try:
        return _seen(cls)
    finally:
        gc.freeze()


@pytest.fixture
def policy() -> Iterator[GcPolicy]:
    """A policy whose first settle is behind it (its baseline taken); the test process's
    collector is left as it was found: nothing frozen, automatic collections on."""
    gc.disable()  # only the policy collects here
    settled = GcPolicy()
    try:
        settled.settle()
        yield settled
    finally:
        gc.unfreeze()
        gc.enable()


def test_garbage_made_between_passes_is_collected_not_frozen(policy: GcPolicy) -> None:
    """A cycle that died since the last pass is freed at the next settle, by the small
    collection that never walks what is frozen (issue 25.6: a pass's rows, held by such a
    cycle, stayed frozen with what lived)."""
    _, holder = _cycle()
    holder.clear()
    del _
    policy.settle()
    assert _instances(_Cycle) == 0
    assert policy.full == 0


def test_an_idle_heap_is_never_walked_whole(policy: GcPolicy) -> None:
    """With a heap that does not grow, no settle hands the frozen objects back: the full walk
    (0.5 s of CPU at 5,000 machines, seconds on a loaded machine) that every 100th pass made
    and a submission waited for (issue 29) never comes, however many passes run."""
    for _ in range(300):
        policy.settle()
    assert policy.full == 0
    assert policy.passes == 301


def test_a_heap_grown_by_a_quarter_is_collected_whole(policy: GcPolicy) -> None:
    """A cycle frozen while alive, dead since, stays (no collection sees it) until the heap
    has grown by `GROWTH` past its size after the last full collection; the next settle then
    walks everything, frees it, and takes that size as the new baseline."""
    cycle, holder = _cycle()
    policy.settle()  # frozen alive
    assert (_seen(_Cycle), _instances(_Cycle)) == (0, 1)
    holder.clear()
    del cycle
    policy.settle()
    # Frozen garbage: one cycle is not worth a walk of everything.
    assert (_seen(_Cycle), _instances(_Cycle)) == (0, 1)
    assert policy.full == 0
    grown = [object() for _ in range(int(sys.getallocatedblocks() * (GROWTH + 0.05)))]
    policy.settle()
    assert policy.full == 1
    assert _instances(_Cycle) == 0
    assert policy.baseline >= len(grown)
    del grown


def test_the_pass_worker_collects_only_at_its_passes() -> None:
    """The pass worker's automatic collections are off (each pass settles instead): while the
    first pass built every record and the live state, they walked the growing heap again and
    again."""
    pool = worker_pool()
    try:
        assert pool.submit(gc.isenabled).result(timeout=60) is False
    finally:
        pool.shutdown()


def test_a_pass_that_fails_before_its_settle_still_collects(
    policy: GcPolicy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without automatic collections, a worker pass that raises (a storage fault) collects
    what it left: passes failing one after another leave no garbage to grow."""

    def failing(state: PassState, inputs: PassInputs) -> None:
        _cycle()[1].clear()  # garbage no frame refers to (the traceback keeps its frames)
        raise RuntimeError("the file is gone")

    monkeypatch.setattr(pass_worker, "compute_pass", failing)
    db = str(tmp_path / "astraeus.db")
    inputs = PassInputs(START, timedelta(seconds=30), START, 500, 5.0)
    try:
        with pytest.raises(RuntimeError, match="the file is gone"):
            worker_pass(db, inputs)
        assert _instances(_Cycle) == 0
    finally:
        pass_worker._OPEN.pop(db).store.close()


_FREED_BETWEEN_KEPT = """
import json
from astraeus.coordinator import compact
from astraeus.coordinator.scheduler.gc_policy import give_back_freed
from astraeus.shared import MachineReport

def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024

def report(i):
    gpus = [
        {"index": g, "uuid": f"GPU-{i}-{g}", "vendor": "nvidia", "model": "H100",
         "memory_bytes": 85520809984}
        for g in range(8)
    ]
    return {"schema_version": "1.0", "name": f"m-{i:05}", "cpu_cores": 64,
            "memory_bytes": 2**40, "gpus": gpus}

# What a start does: every machine's report JSON and compact form read, each decoded into what
# lives on, then the texts dropped.
form = compact.encode(MachineReport.model_validate(report(0)), "f" * 64)
texts = [(json.dumps(report(i)), form.replace("m-00000", f"m-{i:05}")) for i in range(5000)]
kept = [compact.decode(text[1]) for text in texts]
del texts
before = rss()
give_back_freed()
print(json.dumps({"before": before, "after": rss()}))
"""


@pytest.mark.skipif(gc_policy._TRIM is None, reason="no malloc_trim in this C library")
def test_memory_freed_between_what_lives_on_is_given_back() -> None:
    """Texts freed between blocks that live on stay resident until handed back (5,000
    machines: measured 12.8 MB given back)."""
    done = subprocess.run(
        [sys.executable, "-c", _FREED_BETWEEN_KEPT], capture_output=True, text=True, check=True
    )
    found = json.loads(done.stdout)
    assert found["before"] - found["after"] > 4 * 1024 * 1024, found
