"""A filter reads only what its `READS` declares (`cache/reads.py`), and the verdicts kept by that
declaration equal the verdicts worked out afresh for each run and machine."""

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from astraeus.coordinator.placement import (
    Pending,
    Placement,
    PlacementSession,
    Rejection,
    evaluation,
    place,
)
from astraeus.coordinator.placement.cache import prepared
from astraeus.coordinator.placement.cache.reads import UndeclaredReadError, guarded
from astraeus.coordinator.placement.fabrics import network_place
from astraeus.coordinator.placement.facts import free_now, machine_facts
from astraeus.coordinator.placement.filters import (
    DYNAMIC,
    EARLY,
    FILTERS,
    LATE,
    OTHER_DYNAMIC,
    READS_OF,
    Check,
    Filter,
    Reads,
    first_rejection,
)
from astraeus.coordinator.placement.needs import Needs
from astraeus.coordinator.testing.fake_cluster import machine, run, snapshot
from astraeus.shared.fake_gpu import gpu_uuid

NOW = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
ONE = {"gpu_requests": {"count": 1}}


def check(ask: dict[str, Any], **machine_args: Any) -> Check:
    view = machine("m", **machine_args)
    needs, facts = Needs(run(ask=ask)), machine_facts(view)
    return Check(
        needs=needs,
        facts=facts,
        free=free_now(facts),
        worker=needs.worker(needs.gpus),
        now=NOW,
        place=network_place(facts.report, needs.min_gbps, False),
    )


Reader = Callable[[Check], object]

UNDECLARED: list[tuple[Reads, Reader, str]] = [
    # (declared, what the filter reads, the first part of it the declaration refuses)
    (Reads.MACHINE, lambda c: c.free.cpu_cores, "free"),
    (Reads.MACHINE, lambda c: c.needs.gpus, "needs.gpus"),
    (Reads.MACHINE, lambda c: c.needs.run.name, "needs.run.name"),
    (Reads.MACHINE, lambda c: c.facts.snapshot.used_gpu_ids, "facts.snapshot.used_gpu_ids"),
    (Reads.MACHINE, lambda c: c.worker, "worker"),
    (Reads.RUN, lambda c: c.facts.rack, "facts"),
    (Reads.RUN, lambda c: c.free.cpu_cores, "free.cpu_cores"),
    (Reads.FREE, lambda c: c.facts.site, "facts.site"),
    (Reads.FREE, lambda c: c.place, "place"),
    (Reads.FREE, lambda c: c.now, "now"),
    (Reads.FREE, lambda c: c.needs.run.name, "needs.run.name"),
    (Reads.FREE, lambda c: c.free.gpu_ids, "free.gpu_ids"),
    (Reads.FREE, lambda c: c.facts.report.labels, "facts.report.labels"),
]


@pytest.mark.parametrize(("reads", "reader", "path"), UNDECLARED)
def test_a_read_beyond_the_declaration_fails_naming_it(
    reads: Reads, reader: Reader, path: str
) -> None:
    """Each declaration refuses what its verdicts are not kept by: what is free for a
    `Reads.MACHINE` filter, what the free kind does not say for a `Reads.FREE` one."""
    with pytest.raises(UndeclaredReadError, match=re.escape(f"filter 'wrong' reads {path},")):
        reader(guarded(check(ONE), "wrong", reads))


def test_a_pinned_run_s_gpu_filter_may_read_the_machine_s_gpus() -> None:
    """A run pinning GPU ids is checked machine by machine, so its `Reads.FREE` filters may
    read which GPUs are free; another run's may not."""
    pinned = guarded(check({"gpu_requests": {"count": 1, "ids": ["0"]}}), "gpus", Reads.FREE)
    assert gpu_uuid("m", 0) in pinned.free.gpu_ids
    with pytest.raises(UndeclaredReadError):
        _ = guarded(check(ONE), "gpus", Reads.FREE).free.gpu_ids


def test_declared_reads_give_the_values_themselves() -> None:
    """Through the guard a filter sees the same values: a missing report reads as None."""
    c = check({"gpu_requests": {"count": 2}}, used_cores=10)
    seen = guarded(c, "room", Reads.FREE)
    assert (seen.free.cpu_cores, seen.worker, seen.supply) == (86, c.worker, c.supply)
    assert guarded(check(ONE, reported=False), "room", Reads.FREE).facts.report is None


def wrong_filter(c: Check) -> Rejection | None:
    """Declared `Reads.MACHINE`, but keeps out a machine by what is free on it: its verdict,
    kept for every later run of the ask, would outlive the machine's free cores."""
    if c.free.cpu_cores < 8:
        return Rejection(filter="wrong", reason="busy", code="Busy")
    return None


def test_a_wrongly_declared_filter_fails_in_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registered among the engine's static filters, the wrong filter fails the first placement
    that reaches it (this module's conftest guards every placement test the same way)."""
    monkeypatch.setattr(prepared, "EARLY", (*EARLY, ("wrong", wrong_filter)))
    monkeypatch.setitem(READS_OF, "wrong", Reads.MACHINE)
    with pytest.raises(UndeclaredReadError, match="filter 'wrong' reads free,"):
        place(run(ask=ONE), snapshot(machine("a"), machine("b")), NOW)


def site_filter(c: Check) -> Rejection | None:
    """Declared `Reads.FREE`, but reads the machine's site, which its free kind does not say:
    its verdict, decided once per free kind, would hold for machines of other sites too."""
    if c.facts.site == "far":
        return Rejection(filter="far", reason="far away", code="Far")
    return None


def add_dynamic(monkeypatch: pytest.MonkeyPatch, name: str, decide: Filter, reads: Reads) -> None:
    """Register a filter among the dynamic ones, as a new filter module would be."""
    monkeypatch.setattr(evaluation, "DYNAMIC", (*DYNAMIC, (name, decide)))
    monkeypatch.setattr(evaluation, "OTHER_DYNAMIC", (*OTHER_DYNAMIC, (name, decide)))
    monkeypatch.setitem(READS_OF, name, reads)


def test_a_wrongly_declared_free_filter_fails_in_the_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same for the filters a run's evaluation decides per free kind."""
    add_dynamic(monkeypatch, "far", site_filter, Reads.FREE)
    with pytest.raises(UndeclaredReadError, match=re.escape("filter 'far' reads facts.site,")):
        place(run(ask=ONE), snapshot(machine("a"), machine("b")), NOW)


def half_idle(c: Check) -> Rejection | None:
    """A new `Reads.FREE` filter, declared rightly: half the machine's cores must be free."""
    report = c.facts.report
    if report is not None and c.free.cpu_cores < report.cpu_cores / 2:
        return Rejection(filter="half_idle", reason="too busy", code="TooBusy")
    return None


def test_a_new_filter_needs_no_cache_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registered with its `READS`, a new filter keeps machines out of placements and shows in
    explanations, with nothing else changed: the busier machine, which packing prefers, is
    kept out."""
    snap = snapshot(machine("a", used_gpus=range(4), used_cores=60), machine("b"))
    first = place(run(ask=ONE), snap, NOW)
    assert isinstance(first, Placement)
    assert first.workers[0].machine == "a"
    add_dynamic(monkeypatch, "half_idle", half_idle, Reads.FREE)
    then = place(run(ask=ONE), snap, NOW)
    assert isinstance(then, Placement)
    assert then.workers[0].machine == "b"
    only_a = {"gpu_requests": {"count": 4}, "node_selection": {"names": ["a"]}}
    waiting = place(run(ask=only_a), snap, NOW)
    assert isinstance(waiting, Pending)
    assert [node.reasons for node in waiting.explanation.nodes if node.name == "a"] == [
        ["too busy"]
    ]


def test_every_filter_declares_one_of_the_three() -> None:
    assert [name for name, _ in FILTERS] == list(READS_OF)
    assert set(READS_OF.values()) <= set(Reads)


ASKS: list[dict[str, Any]] = [
    ONE,
    {"gpu_requests": {"count": 8}, "per_gpu": {"cpu_cores": 8}},
    {"gpu_requests": {"count": 4, "models": ["H100"]}, "cpu_cores": 30},
    {"gpu_requests": {"count": 2, "min_memory_gb": 90}},
    {"gpu_requests": {"count": 16}, "network": {"interconnect": "infiniband"}},
    {"gpu_requests": {"count": 8}, "topology": {"keep_within": "rack"}},
    {"gpu_requests": {"count": 1}, "node_selection": {"match_labels": {"team": "nlp"}}},
    {"cpu_cores": 4},
]


@st.composite
def views(draw: st.DrawFn, index: int) -> Any:
    count = draw(st.sampled_from([0, 4, 8]))
    return machine(
        f"m{index:02d}",
        gpu_count=count,
        used_gpus=range(draw(st.integers(0, count))),
        used_cores=draw(st.sampled_from([0, 40, 90])),
        rack=draw(st.sampled_from([None, "r0"])),
        labels_=draw(st.sampled_from([{}, {"team": "nlp"}])),
        cordon=draw(st.sampled_from([None, None, "maintenance"])),
        reported=draw(st.sampled_from([True, True, True, False])),
        capabilities=draw(st.sampled_from([("container",), ()])),
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    machines=st.integers(1, 8).flatmap(lambda n: st.tuples(*(views(i) for i in range(n)))),
    first=st.sampled_from(ASKS),
    then=st.sampled_from(ASKS),
    gpus=st.sampled_from([1, 2, 8]),
)
def test_kept_static_verdicts_equal_each_run_s_own(
    machines: tuple[Any, ...], first: dict[str, Any], then: dict[str, Any], gpus: int
) -> None:
    """A run whose static key equals an earlier run's reads that run's kept `Reads.MACHINE`
    verdicts; they equal the filters run afresh on each machine for this run, whatever its
    name, size and worker."""
    snap = snapshot(*machines)
    session = PlacementSession(snap)
    session.place(run("first", ask=first), NOW)
    ask = {**then, "gpu_requests": {**then.get("gpu_requests", {}), "count": gpus}}
    if "gpu_requests" not in then:
        ask.pop("gpu_requests")
    needs = Needs(run("then", ask=ask))
    kept = session._prepare(needs, NOW, frozenset())
    for i, view in enumerate(sorted(snap.machines, key=lambda one: one.name)):
        facts = machine_facts(view)
        fresh = Check(
            needs=needs,
            facts=facts,
            free=free_now(facts),
            worker=needs.worker(0),
            now=NOW,
            place=kept.cluster.places[i],
            known_drives=kept.cluster.drives_in(needs.run.pools),
        )
        assert kept.early(i) == first_rejection(fresh, EARLY)
        assert kept.late(i) == first_rejection(fresh, LATE)
