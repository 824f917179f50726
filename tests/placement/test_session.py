"""A placement session: many runs over one snapshot, `take`, `exclude`, and purity."""

from datetime import UTC, datetime

from astraeus.coordinator.placement import (
    Pending,
    Placement,
    PlacementSession,
    place,
)
from astraeus.coordinator.testing.fake_cluster import machine, run, snapshot
from astraeus.shared.fake_gpu import gpu_uuid

NOW = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
ONE = {"gpu_requests": {"count": 1}}


def test_place_equals_a_fresh_session() -> None:
    """`place` gives exactly what a fresh session's `place` gives."""
    snap = snapshot(machine("a", used_gpus=range(3)), machine("b"))
    for ask in (ONE, {"gpu_requests": {"count": 16}}, {"gpu_requests": {"count": 24}}):
        assert place(run(ask=ask), snap, NOW) == PlacementSession(snap).place(run(ask=ask), NOW)


def test_same_input_same_output() -> None:
    """Deciding twice gives equal results."""
    snap = snapshot(*(machine(f"m{i}", used_gpus=range(i % 8)) for i in range(20)))
    ask = {"gpu_requests": {"count": 32}}
    assert place(run(ask=ask), snap, NOW) == place(run(ask=ask), snap, NOW)


def test_take_makes_later_runs_see_what_is_left() -> None:
    """Eight 1-GPU runs fill one 8-GPU machine with distinct GPUs; the ninth waits."""
    session = PlacementSession(snapshot(machine("a")))
    given: list[str] = []
    for index in range(8):
        result = session.place(run(f"r{index}", ask=ONE), NOW)
        assert isinstance(result, Placement)
        session.take(result)
        given.extend(result.workers[0].gpu_ids)
    assert sorted(given) == sorted(gpu_uuid("a", i) for i in range(8))
    last = session.place(run("r8", ask=ONE), NOW)
    assert isinstance(last, Pending)
    assert last.explanation.nodes[0].reasons == ["insufficient gpus: need 1, 0 free and usable"]
    assert last.explanation.closest == "a"


def test_take_counts_cores_and_memory() -> None:
    """A taken worker's cores are not offered again in the same pass."""
    session = PlacementSession(snapshot(machine("a", cpu_cores=8)))
    first = session.place(run("one", ask={"cpu_cores": 6}), NOW)
    assert isinstance(first, Placement)
    session.take(first)
    second = session.place(run("two", ask={"cpu_cores": 6}), NOW)
    assert isinstance(second, Pending)
    assert second.explanation.nodes[0].reasons == ["insufficient cpu: need 6, 2 free"]


def test_excluded_machines_are_held_for_a_run_ahead() -> None:
    """A machine in `exclude` is unavailable, with the held reason; holding is room (it ends
    when the run ahead starts), so the run still fits, has a closest machine and wants some."""
    session = PlacementSession(snapshot(machine("a"), machine("b")))
    result = session.place(run(ask=ONE), NOW, exclude=frozenset({"a"}))
    assert isinstance(result, Placement)
    assert result.landing.machines == ["b"]
    both = session.place(run(ask=ONE), NOW, exclude=frozenset({"a", "b"}))
    assert isinstance(both, Pending)
    assert both.headline == "No machine fits: 2 of 2 machines ready"
    assert [node.reasons for node in both.explanation.nodes] == [
        ["held for a run ahead in the queue"],
        ["held for a run ahead in the queue"],
    ]
    assert both.explanation.closest == "a"
    assert both.wanted_machines == ("a",)


def test_wanted_machines_are_those_the_run_would_use_if_idle() -> None:
    """A pending 16-GPU run wants the two machines it would use idle; none when impossible."""
    snap = snapshot(machine("a", used_gpus=range(4)), machine("b"), machine("c", gpu_count=4))
    waiting = place(run(ask={"gpu_requests": {"count": 16}}), snap, NOW)
    assert isinstance(waiting, Pending)
    assert waiting.wanted_machines == ("a", "b")
    never = place(run(ask={"gpu_requests": {"count": 64}}), snap, NOW)
    assert isinstance(never, Pending)
    assert never.wanted_machines == ()
    assert never.explanation.closest is None


def test_idle_machines_leave_out_the_excluded_and_do_not_change_the_idle_fit() -> None:
    """`idle_machines` is the idle-cluster placement without the excluded machines (busy ones
    count as idle): a 16-GPU run takes two others when `a` is excluded, none when only one
    8-GPU machine is left. The ask's kept idle fit is unchanged: `wanted_machines` after those
    searches is still the unrestricted one."""
    snap = snapshot(machine("a", used_gpus=range(8)), machine("b"), machine("c", used_gpus=[0]))
    session = PlacementSession(snap)
    sixteen = run(ask={"gpu_requests": {"count": 16}, "machines": 2})
    assert session.idle_machines(sixteen, NOW, frozenset()) == ("a", "b")
    assert session.idle_machines(sixteen, NOW, frozenset({"a"})) == ("b", "c")
    assert session.idle_machines(sixteen, NOW, frozenset({"a", "b"})) == ()
    waiting = session.place(sixteen, NOW)
    assert isinstance(waiting, Pending)
    assert waiting.wanted_machines == ("a", "b")
    assert session.idle_machines(sixteen, NOW, frozenset({"b"})) == ("a", "c")


def test_idle_machines_of_a_run_without_gpus_leave_out_the_excluded() -> None:
    """A run without GPUs leaves the excluded machines out too (as machines held for a run
    ahead: counting them as without GPUs would not keep it off them)."""
    snap = snapshot(machine("a"), machine("b"), machine("c"))
    session = PlacementSession(snap)
    cpu = run(ask={"gpu_requests": {"count": 0}, "cpu_cores": 4})
    assert session.idle_machines(cpu, NOW, frozenset()) == ("a",)
    assert session.idle_machines(cpu, NOW, frozenset({"a", "b"})) == ("c",)
    assert session.idle_machines(cpu, NOW, frozenset({"a", "b", "c"})) == ()


def test_pinned_ids_by_index_or_uuid_place_those_gpus() -> None:
    """Pinned `ids` take exactly those GPUs, named by index or UUID; results carry UUIDs."""
    snap = snapshot(machine("a"))
    by_index = place(run(ask={"gpu_requests": {"count": 2, "ids": ["3", "5"]}}), snap, NOW)
    assert isinstance(by_index, Placement)
    assert by_index.workers[0].gpu_ids == (gpu_uuid("a", 3), gpu_uuid("a", 5))
    by_uuid = place(run(ask={"gpu_requests": {"count": 1, "ids": [gpu_uuid("a", 6)]}}), snap, NOW)
    assert isinstance(by_uuid, Placement)
    assert by_uuid.workers[0].gpu_ids == (gpu_uuid("a", 6),)


def test_runs_with_the_same_ask_share_verdicts_but_not_names() -> None:
    """Two runs with one ask in one pass: the second's spread filter sees its own name."""
    session = PlacementSession(snapshot(machine("a", workers=[("vision", "second")]), machine("b")))
    first = session.place(run("first", ask=ONE), NOW)
    second = session.place(run("second", ask=ONE), NOW)
    assert isinstance(first, Placement)
    assert isinstance(second, Placement)
    assert (first.landing.machines, second.landing.machines) == (["a"], ["b"])
