"""The live placement state, changed by deltas, always equals a state built afresh."""

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from astraeus.coordinator.placement import (
    ClusterSnapshot,
    MachineSnapshot,
    PlacementSession,
    Reservation,
)
from astraeus.coordinator.placement.cache import KEPT_ASKS, LiveState
from astraeus.coordinator.testing.fake_cluster import gpus, machine, run
from astraeus.shared import MachineState

NOW = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
ASKS: list[dict[str, Any]] = [
    {"gpu_requests": {"count": 1}, "per_gpu": {"cpu_cores": 4}},
    {"gpu_requests": {"count": 4, "min_per_machine": 4}},
    {"gpu_requests": {"count": 16}, "topology": {"keep_within": "rack"}},
    {"gpu_requests": {"count": 2, "healthy_only": True}, "node_selection": {"mode": "Any"}},
    {"gpu_requests": {"count": 64}},
]

RESERVATIONS: list[list[Reservation]] = [
    [],
    [Reservation(workspace="other")],
    [Reservation(workspace="other", starts_at=NOW + timedelta(hours=2))],
]


@dataclass
class Spec:
    """One machine's inputs; `view()` is how the store would show it to a pass."""

    name: str
    gpu_count: int = 8
    at_risk: tuple[int, ...] = ()
    rack: str = "r0"
    used: tuple[int, ...] = ()
    workers: tuple[tuple[str, str], ...] = ()
    cordon: str | None = None
    down: bool = False
    pool: str | None = None
    reserved: int = 0
    """0: none; 1: for another workspace; 2: for it, from two hours after NOW."""
    keyed: bool = True
    extra: dict[str, str] = field(default_factory=dict)

    def view(self) -> MachineSnapshot:
        labels = dict(self.extra) | ({"pool": self.pool} if self.pool else {})
        view = machine(
            self.name,
            gpu_list=gpus(self.name, self.gpu_count, at_risk=self.at_risk),
            rack=self.rack,
            labels_=labels,
            used_gpus=self.used,
            used_cores=4 * len(self.used),
            cordon=self.cordon,
            state=MachineState.DOWN if self.down else MachineState.UP,
            reservations=RESERVATIONS[self.reserved],
            workers=self.workers,
        )
        report = view.report
        assert report is not None
        key = report.model_dump_json(exclude={"reported_at"}) if self.keyed else None
        return replace(view, report_key=key)


def apply(specs: dict[str, Spec], change: tuple[str, int, int]) -> None:
    """One delta: a report that changed, a placement, a task's end, a cordon, a label, a
    reservation, a machine that comes or goes."""
    kind, which, value = change
    name = sorted(specs)[which % len(specs)] if specs else f"m{value:02d}"
    spec = specs.get(name)
    if kind == "add" or spec is None:
        specs[f"m{value:02d}"] = Spec(f"m{value:02d}", rack=f"r{value % 3}")
        return
    if kind == "remove" and len(specs) > 1:
        del specs[name]
    elif kind == "place":
        spec.used = tuple(sorted({*spec.used, value % spec.gpu_count}))
        spec.workers = tuple(sorted({*spec.workers, ("vision", f"run{value}")}))
    elif kind == "worker":  # a task of a run asked below, holding no GPU
        spec.workers = tuple(sorted({*spec.workers, ("vision", f"ask{value % len(ASKS)}")}))
    elif kind == "end":
        spec.used, spec.workers = spec.used[1:], spec.workers[1:]
    elif kind == "cordon":
        spec.cordon = None if spec.cordon is not None else "maintenance"
    elif kind == "health":
        spec.at_risk = () if spec.at_risk else (value % spec.gpu_count,)
    elif kind == "label":
        spec.pool = None if spec.pool else "a"
    elif kind == "down":
        spec.down = not spec.down
    elif kind == "reserve":
        spec.reserved = (spec.reserved + 1) % len(RESERVATIONS)
    elif kind == "heartbeat":
        spec.keyed = not spec.keyed  # a new report object, same content


CHANGES = st.tuples(
    st.sampled_from(
        [
            *("add", "remove", "place", "worker", "end", "cordon", "health", "label"),
            *("down", "reserve", "heartbeat", "heartbeat"),
        ]
    ),
    st.integers(0, 30),
    st.integers(0, 40),
)


def fingerprint(session: PlacementSession, now: datetime, held: str) -> list[Any]:
    """Every decision the session makes for a handful of asks (one also with a machine held
    for a run ahead), explanations included."""
    found = [session.place(run(f"ask{n}", ask=ask), now) for n, ask in enumerate(ASKS)]
    return [*found, session.place(run("held", ask=ASKS[0]), now, exclude=frozenset({held}))]


def index_of(session: PlacementSession) -> tuple[Any, ...]:
    """The session's free capacity and free index, normalised (empty buckets dropped, each
    machine's free kind with its kind's description for the kind, interned per free kind)."""
    index = session._free_index
    buckets = {bucket: entries for bucket, entries in index.buckets.items() if entries}
    states = [(kind.description, *rest) for kind, *rest in index.free_kinds]
    return (session._free, index.free_gpus, buckets, index.classes, states)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(size=st.integers(1, 12), steps=st.lists(st.lists(CHANGES, max_size=4), max_size=8))
def test_deltas_equal_a_fresh_rebuild(size: int, steps: list[list[tuple[str, int, int]]]) -> None:
    """After any sequence of reports, placements, task ends, cordons, labels, reservations and
    machines coming and going, sessions over the live state decide exactly as sessions over a
    state built afresh from the same snapshot, and their free indexes are equal."""
    specs = {f"m{i:02d}": Spec(f"m{i:02d}", rack=f"r{i % 3}") for i in range(size)}
    live = LiveState()
    for step, changes in enumerate([[], *steps]):
        for change in changes:
            apply(specs, change)
        snap = ClusterSnapshot(machines=tuple(spec.view() for spec in specs.values()))
        live.update(snap)
        held = min(specs)
        # Later sessions of the same state, an hour later each: what they share stays true.
        for hours in (step, step + 1):
            now = NOW + timedelta(hours=hours)
            kept, fresh = PlacementSession(live=live), PlacementSession(snap)
            assert index_of(kept) == index_of(fresh)
            assert fingerprint(kept, now, held) == fingerprint(fresh, now, held)


def test_unchanged_machines_are_not_read_again() -> None:
    """A heartbeat (same report key) and a new placement read no machine's facts again; a
    cordon reads only that machine's; a machine that joins reads them all."""
    specs = {f"m{i:02d}": Spec(f"m{i:02d}") for i in range(5)}
    live = LiveState()
    live.update(ClusterSnapshot(tuple(spec.view() for spec in specs.values())))
    assert (live.rebuilt, live.generation) == (5, 1)
    live.update(ClusterSnapshot(tuple(spec.view() for spec in specs.values())))
    assert (live.rebuilt, live.generation) == (0, 1)
    specs["m01"].used = (0, 1)
    live.update(ClusterSnapshot(tuple(spec.view() for spec in specs.values())))
    assert (live.rebuilt, live.generation) == (0, 2)
    specs["m03"].cordon = "maintenance"
    live.update(ClusterSnapshot(tuple(spec.view() for spec in specs.values())))
    assert (live.rebuilt, live.generation) == (1, 3)
    specs["m05"] = Spec("m05")
    live.update(ClusterSnapshot(tuple(spec.view() for spec in specs.values())))
    assert (live.rebuilt, live.generation) == (6, 4)


def test_a_session_taking_leaves_the_live_state_and_other_sessions_alone() -> None:
    """What one session takes is not taken in the live state nor in a session made after."""
    live = LiveState()
    live.update(ClusterSnapshot((Spec("a").view(),)))
    first = PlacementSession(live=live)
    for n in range(8):
        placed = first.place(run(f"r{n}", ask=ASKS[0]), NOW)
        first.take(placed)  # type: ignore[arg-type]
    assert first.place(run("r8", ask=ASKS[0]), NOW).__class__.__name__ == "Pending"
    second = PlacementSession(live=live)
    assert second.place(run("r9", ask=ASKS[0]), NOW).__class__.__name__ == "Placement"
    assert len(live.free[0].gpu_ids) == 8


def test_a_frame_keeps_a_bounded_number_of_asks() -> None:
    """Static verdicts are kept for at most `KEPT_ASKS` asks per frame, the oldest dropped first,
    and a run whose ask was dropped is decided exactly as before."""
    live = LiveState()
    live.update(ClusterSnapshot((Spec("a").view(), Spec("b").view())))
    first = PlacementSession(live=live).place(run("r", ask=ASKS[0]), NOW)
    for n in range(KEPT_ASKS + 5):
        PlacementSession(live=live).place(run("x", ask=ASKS[0], pools=(f"p{n}",)), NOW)
    assert len(live.frame._verdicts) == KEPT_ASKS
    assert PlacementSession(live=live).place(run("r", ask=ASKS[0]), NOW) == first
