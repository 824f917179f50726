"""The `room` and `gpus` filters decided once per free kind (`kinds.FreeKind`), and the explanation
grouped without its per-machine list, say exactly what checking every machine and grouping the full
answer say."""

import pickle
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from astraeus.coordinator.placement import Pending, PlacementSession
from astraeus.coordinator.placement.filters import DYNAMIC, FREE, Check, first_rejection
from astraeus.coordinator.placement.model import ClusterSnapshot, MachineSnapshot
from astraeus.coordinator.placement.needs import Needs
from astraeus.coordinator.testing.fake_cluster import gpus, machine, run, snapshot
from astraeus.shared import GpuInfo, MachineState
from astraeus.shared.explanation import grouped

NOW = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
A100 = "NVIDIA A100-SXM4-40GB"

ASKS: list[dict[str, Any]] = [
    {"gpu_requests": {"count": 4}, "per_gpu": {"cpu_cores": 8, "memory_bytes": 64 * 1024**3}},
    {"gpu_requests": {"count": 2, "models": ["H100"]}},
    {"gpu_requests": {"count": 3, "healthy_only": True}, "cpu_cores": 20},
    {"gpu_requests": {"count": 16, "min_per_machine": 8}, "topology": {"keep_within": "rack"}},
    {"gpu_requests": {"count": 2, "min_memory_gb": 60}, "node_selection": {"mode": "Any"}},
    {"gpu_requests": {"count": 4}, "node_selection": {"mode": "Any"}, "per_gpu": {"cpu_cores": 30}},
    {"cpu_cores": 40, "memory_bytes": 512 * 1024**3},
]


def mixed_gpus(name: str, models: list[bool], health: list[int]) -> list[GpuInfo]:
    """GPUs of two models (True: A100, at 40 GB) with 0 healthy, 1 at risk, 2 faulted."""
    found = []
    for index, (is_a100, state) in enumerate(zip(models, health, strict=True)):
        gpu = gpus(
            name,
            index + 1,
            model=A100 if is_a100 else "NVIDIA H100 80GB HBM3",
            memory_gib=39.5 if is_a100 else 79.6,
            at_risk=[index] if state == 1 else [],
            faulted=[index] if state == 2 else [],
        )[index]
        found.append(gpu)
    return found


LAYOUTS: list[tuple[list[bool], list[int]]] = [
    ([False] * 8, [0] * 8),
    ([False] * 4 + [True] * 4, [0] * 8),
    ([True] * 4 + [False] * 4, [0] * 8),
    ([False] * 8, [1] + [0] * 7),
    ([False] * 8, [0] * 7 + [1]),
    ([False] * 8, [0, 2, 0, 0, 1, 0, 0, 0]),
    ([True] * 4, [0] * 4),
    ([], []),
]
"""GPU models (True: A100) and health (0 healthy, 1 at risk, 2 faulted) by index."""
USED = [(), (0, 1, 2, 3), (4, 5, 6, 7), (0,), (7,), (1, 2), (5, 6), tuple(range(8))]
"""GPUs in use, by index: few layouts and uses, so that machines alike but for which of their
GPUs are free are common."""


@st.composite
def mixed_machine(draw: st.DrawFn, index: int) -> MachineSnapshot:
    name = f"m{index:02d}"
    models, health = draw(st.sampled_from(LAYOUTS))
    count = len(models)
    used = [gpu for gpu in draw(st.sampled_from(USED)) if gpu < count]
    return machine(
        name,
        gpu_list=mixed_gpus(name, models, health),
        cpu_cores=128,
        memory_gib=1024,
        rack=f"r{index % 3}",
        used_gpus=used,
        used_cores=draw(st.sampled_from([0, 0, 100])),
        used_memory_gib=draw(st.sampled_from([0, 0, 700])),
        state=draw(st.sampled_from([MachineState.UP] * 5 + [MachineState.DOWN])),
        reported=draw(st.sampled_from([True] * 9 + [False])),
        cordon=draw(st.sampled_from([None] * 5 + ["maintenance"])),
        workers=draw(st.sampled_from([(), (), (("vision", "run"),), (("vision", "other"),)])),
    )


@st.composite
def mixed_clusters(draw: st.DrawFn) -> ClusterSnapshot:
    size = draw(st.integers(4, 24))
    return snapshot(*(draw(mixed_machine(index)) for index in range(size)))


def every_machine_checked(session: PlacementSession, ask: dict[str, Any], *, idle: bool) -> Any:
    """Each machine's first rejection, the dynamic filters run on it alone, and the verdicts
    and caps the session's evaluation (by free kind) gives."""
    needs = Needs(run("run", ask=ask))
    prepared = session._prepare(needs, NOW, frozenset())
    evaluation = session._idle_evaluation(prepared) if idle else session._evaluation(prepared)
    alone = []
    for i, facts in enumerate(prepared.cluster.facts):
        check = Check(
            needs=needs,
            facts=facts,
            free=evaluation.free[i],
            worker=evaluation.smallest,
            now=NOW,
            place=prepared.cluster.places[i],
        )
        dynamic = first_rejection(check, FREE if idle else DYNAMIC)
        alone.append(prepared.early(i) or dynamic or prepared.late(i))
    machines = range(len(prepared.cluster.facts))
    by_state = evaluation.rejections(machines)
    one_by_one = [evaluation.rejection(i) for i in machines]
    return alone, by_state, one_by_one


def test_which_gpus_are_free_tells_machines_apart() -> None:
    """Two machines of four H100s and four A100s, each with four free, are of different free
    kinds when different models are free: a run asking H100s fits on one only."""
    layout = [False] * 4 + [True] * 4
    views = [
        machine("m1", gpu_list=mixed_gpus("m1", layout, [0] * 8), used_gpus=[0, 1, 2, 3]),
        machine("m2", gpu_list=mixed_gpus("m2", layout, [0] * 8), used_gpus=[4, 5, 6, 7]),
    ]
    alone, by_state, _ = every_machine_checked(
        PlacementSession(snapshot(*views)), ASKS[1], idle=False
    )
    assert [rejection and rejection.reason for rejection in by_state] == [
        "insufficient gpus: need 1, 0 free and usable",
        None,
    ]
    assert by_state == alone


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snap=mixed_clusters(), ask=st.sampled_from(ASKS), idle=st.booleans())
def test_verdicts_by_state_equal_each_machine_checked(
    snap: ClusterSnapshot, ask: dict[str, Any], idle: bool
) -> None:
    """On clusters of mixed GPU models, health, use, cores and memory, every machine's verdict
    decided once per free kind equals the dynamic filters run on that machine alone."""
    alone, by_state, one_by_one = every_machine_checked(PlacementSession(snap), ask, idle=idle)
    assert by_state == alone
    assert one_by_one == alone


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snap=mixed_clusters(), ask=st.sampled_from(ASKS))
def test_grouped_answer_equals_the_full_answer_grouped(
    snap: ClusterSnapshot, ask: dict[str, Any]
) -> None:
    """For any run no machine of a mixed cluster can take now, the explanation grouped from
    the engine's verdicts equals the full per-machine explanation grouped, also once it has
    crossed from the pass worker (pickled with its forms made)."""
    result = PlacementSession(snap).place(run("run", ask=ask), NOW)
    if not isinstance(result, Pending):
        return
    direct = result.explained.grouped()
    assert direct == grouped(result.explanation, result.rejections)
    crossed = pickle.loads(pickle.dumps(result.explained))  # noqa: S301 - our own bytes
    assert crossed.grouped() == direct
    assert crossed == result.explained


def test_a_mixed_cluster_grouped() -> None:
    """Down, cordoned, short of GPUs (two ways), of cores, and of the model: counted by
    reason, most first, with the closest machines, exactly as the full answer grouped."""
    views = [
        machine("a-down", state=MachineState.DOWN),
        machine("b-cordoned", cordon="firmware"),
        *(machine(f"c-{n}", used_gpus=range(6)) for n in range(12)),
        machine("d-half", used_gpus=range(5)),
        machine("e-busy", used_cores=90),
        machine("f-a100", model=A100),
    ]
    ask = {"gpu_requests": {"count": 4, "min_per_machine": 4, "models": ["H100"]}}
    ask["per_gpu"] = {"cpu_cores": 2}
    result = PlacementSession(snapshot(*views)).place(run("run", ask=ask), NOW)
    assert isinstance(result, Pending)
    answer = result.explained.grouped()
    assert answer == grouped(result.explanation, result.rejections)
    assert [(r.reason, r.state.value, r.code, r.room, r.count) for r in answer.reasons] == [
        ("insufficient gpus: need 4, 2 free and usable", "Up", "InsufficientGPUs", True, 12),
        ("insufficient cpu: need 8, 6 free", "Up", "InsufficientCPU", True, 1),
        ("insufficient gpus: need 4, 3 free and usable", "Up", "InsufficientGPUs", True, 1),
        ("machine is cordoned: firmware", "Up", "Cordoned", False, 1),
        ("machine is down", "Down", "MachineDown", False, 1),
        ("no H100 GPU", "Up", "NoGPUModel", False, 1),
    ]
    assert answer.reasons[0].machines == [f"c-{n}" for n in (0, 1, 10, 11, 2, 3, 4, 5, 6, 7)]
    # d-half has 3 of 4 GPUs, e-busy 6 of 8 cores: a tie, and the first by name wins.
    assert answer.closest_machines == ["d-half", "c-0", "c-1", "c-10", "c-11"]
    assert (answer.checked_nodes, answer.ready_nodes, answer.down_nodes) == (17, 16, 1)
