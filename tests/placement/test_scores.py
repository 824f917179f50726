"""The guide's score table, term by term, through `score_breakdown`."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from astraeus.coordinator.placement import Placement, Reservation, place, score_breakdown
from astraeus.coordinator.testing.fake_cluster import gpus, machine, rdma_port, run, snapshot
from astraeus.shared import DriveInfo

NOW = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
GIB = 1024**3
DRIVE = {"drives": [{"name": "datasets", "mount_path": "/data"}]}


def term(name: str, ask: dict[str, Any], gpus_taken: int, **machine_fields: Any) -> int:
    breakdown = dict(
        score_breakdown(run(ask=ask), machine("m", **machine_fields), gpus_taken, now=NOW)
    )
    return breakdown[name]


CASES = [
    pytest.param(
        "reserved_for_labels",
        {"gpu_requests": {"count": 1}, "node_selection": {"match_labels": {"team": "nlp"}}},
        1,
        {"reservations": [Reservation(labels={"team": "nlp"})]},
        95,
        id="reserved-one-label",
    ),
    pytest.param(
        "reserved_for_labels",
        {
            "gpu_requests": {"count": 1},
            "node_selection": {"match_labels": {"team": "nlp", "tier": "a"}},
        },
        1,
        {"reservations": [Reservation(labels={"team": "nlp", "tier": "a"})]},
        90,
        id="reserved-two-labels",
    ),
    pytest.param(
        "reserved_for_labels",
        {"gpu_requests": {"count": 1}},
        1,
        {"reservations": [Reservation(labels={"team": "nlp"}, starts_at=NOW + timedelta(hours=1))]},
        0,
        id="reservation-not-yet",
    ),
    pytest.param("gpus_packed", {"gpu_requests": {"count": 8}}, 8, {}, 50, id="packed-full"),
    pytest.param("gpus_packed", {"gpu_requests": {"count": 2}}, 2, {}, 12, id="packed-2-of-8"),
    pytest.param(
        "gpus_packed",
        {"gpu_requests": {"count": 2}},
        2,
        {"used_gpus": range(4)},
        37,
        id="packed-6-of-8",
    ),
    pytest.param("cpu_only_on_gpu_machine", {"cpu_cores": 1}, 0, {}, -30, id="cpu-on-gpu"),
    pytest.param(
        "cpu_only_on_gpu_machine", {"cpu_cores": 1}, 0, {"gpu_count": 0}, 0, id="cpu-on-cpu"
    ),
    pytest.param("cores_free", {"cpu_cores": 48}, 0, {}, 12, id="cores-half"),
    pytest.param("cores_free", {"gpu_requests": {"count": 1}}, 0, {}, 25, id="cores-all"),
    pytest.param("memory_free", {"memory_bytes": 768 * GIB}, 0, {}, 6, id="memory-quarter"),
    pytest.param(
        "gpus_at_risk",
        {"gpu_requests": {"count": 8}},
        8,
        {"gpu_list": gpus("m", 8, at_risk=[0, 1])},
        -120,
        id="two-at-risk",
    ),
    pytest.param("cpu_pressure", {"cpu_cores": 1}, 0, {"cpu_pressure": True}, -20, id="pressure"),
    pytest.param(
        "rdma_port_at_risk",
        {"gpu_requests": {"count": 1}, "network": {"interconnect": "rdma"}},
        1,
        {"ports": [rdma_port(at_risk=True)]},
        -25,
        id="rdma-at-risk",
    ),
    pytest.param(
        "rdma_port_at_risk",
        {"gpu_requests": {"count": 1}},
        1,
        {"ports": [rdma_port(at_risk=True)]},
        0,
        id="rdma-at-risk-not-rdma-work",
    ),
    pytest.param(
        "drives_here",
        DRIVE,
        0,
        {"drives": [DriveInfo(name="datasets")]},
        40,
        id="drive-here",
    ),
]


@pytest.mark.parametrize(("name", "ask", "gpus_taken", "machine_fields", "points"), CASES)
def test_score_term(
    name: str, ask: dict[str, Any], gpus_taken: int, machine_fields: dict[str, Any], points: int
) -> None:
    """Each term gives the guide's points for its case."""
    assert term(name, ask, gpus_taken, **machine_fields) == points


def test_breakdown_lists_every_term_in_the_guides_order() -> None:
    """The breakdown names all ten terms, in the order of the guide's table."""
    names = [name for name, _ in score_breakdown(run(), machine("m"), 0, now=NOW)]
    assert names == [
        "reserved_for_labels",
        "gpus_packed",
        "cpu_only_on_gpu_machine",
        "cores_free",
        "memory_free",
        "gpus_at_risk",
        "cpu_pressure",
        "rdma_port_at_risk",
        "drives_here",
        "drives_near",
    ]


@pytest.mark.parametrize(
    ("home_ports", "here_ports", "points"),
    [
        pytest.param([rdma_port()], [rdma_port()], 15, id="near-rdma-both-ends"),
        pytest.param([], [], 10, id="near-no-rdma"),
    ],
)
def test_drive_near(home_ports: list[Any], here_ports: list[Any], points: int) -> None:
    """A drive on another machine of the same rack scores +15 with RDMA at both ends, else +10."""
    home = machine("home", rack="r1", ports=home_ports, drives=[DriveInfo(name="datasets")])
    here = machine(
        "here", rack="r1", ports=here_ports, drives=[DriveInfo(name="datasets", local=False)]
    )
    breakdown = dict(
        score_breakdown(run(ask=DRIVE), here, 0, now=NOW, snapshot=snapshot(home, here))
    )
    assert breakdown["drives_near"] == points


def test_single_worker_goes_to_the_highest_score_ties_by_name() -> None:
    """Of two identical machines the first by name wins; a fuller one wins on packing."""
    ask = {"gpu_requests": {"count": 2}}
    same = place(run(ask=ask), snapshot(machine("b"), machine("a")), NOW)
    assert isinstance(same, Placement)
    assert same.landing.machines == ["a"]
    fuller = place(run(ask=ask), snapshot(machine("a"), machine("b", used_gpus=range(6))), NOW)
    assert isinstance(fuller, Placement)
    assert fuller.landing.machines == ["b"]


def test_healthy_machine_beats_one_with_only_at_risk_gpus_free() -> None:
    """A worker that would take an at-risk GPU there goes to a machine with healthy ones."""
    risky = machine("a", gpu_list=gpus("a", 8, at_risk=[7]), used_gpus=range(7))
    result = place(run(ask={"gpu_requests": {"count": 1}}), snapshot(risky, machine("b")), NOW)
    assert isinstance(result, Placement)
    assert result.landing.machines == ["b"]
