"""A machine held for the run at the head of the queue shows what else keeps it out of a later
run first: `held for a run ahead in the queue` is about room, and only where the machine would
otherwise take the run (issue 26, item 4). The headline and `closest` follow."""

from datetime import UTC, datetime
from typing import Any

from astraeus.coordinator.placement import Pending, PlacementSession
from astraeus.coordinator.testing.fake_cluster import machine, run, snapshot
from astraeus.shared import DriveInfo
from astraeus.shared.reasons import ReasonKind

NOW = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
HELD = "held for a run ahead in the queue"
DATASETS = {"name": "datasets", "mount_path": "/data"}


def waits(ask: dict[str, Any], held: set[str], *machines: Any) -> Pending:
    """The run placed in a session where `held` are held for the head of the queue."""
    result = PlacementSession(snapshot(*machines)).place(run(ask=ask), NOW, exclude=frozenset(held))
    assert isinstance(result, Pending)
    return result


def reasons_by_machine(result: Pending) -> dict[str, list[str]]:
    return {node.name: node.reasons for node in result.explanation.nodes}


def test_a_b200_run_on_held_h100_machines_says_no_b200() -> None:
    """The issue's case: a B200 run, one of two H100 machines held. Both say `no B200 GPU`,
    and so does the headline, not `No machine fits`."""
    result = waits(
        {"gpu_requests": {"count": 8, "models": ["B200"]}},
        {"gpu-01"},
        machine("gpu-01"),
        machine("gpu-02"),
    )
    assert reasons_by_machine(result) == {"gpu-01": ["no B200 GPU"], "gpu-02": ["no B200 GPU"]}
    assert (result.headline, result.kind) == ("no B200 GPU", ReasonKind.SAME_REASON)
    assert result.explanation.closest is None


def test_a_held_machine_without_the_drive_is_never_the_closest() -> None:
    """gpu-01 is held and cannot reach the run's drive; gpu-02 is short of free GPUs. gpu-01
    says the drive, and the closest is gpu-02, the one machine that could take the run."""
    gone = [DriveInfo(name="datasets", local=False, reachable=False)]
    reached = [DriveInfo(name="datasets", local=False)]
    result = waits(
        {"gpu_requests": {"count": 8}, "drives": [DATASETS]},
        {"gpu-01"},
        machine("gpu-01", drives=gone),
        machine("gpu-02", drives=reached, used_gpus=range(4)),
    )
    assert reasons_by_machine(result) == {
        "gpu-01": ["drive datasets is not reachable from this machine"],
        "gpu-02": ["insufficient gpus: need 8, 4 free and usable"],
    }
    assert result.explanation.closest == "gpu-02"
    assert [(g.filter, g.code, g.room) for g in result.rejections] == [
        ("drives", "DriveUnreachable", False),
        ("gpus", "InsufficientGPUs", True),
    ]


def test_held_shows_only_where_the_machine_would_otherwise_fit() -> None:
    """Two held machines: gpu-02 would take the run but for the hold, and says so; gpu-01's
    GPUs are all in use, and it says that (both room: each may clear by itself; neither has
    any of its need now, so the first name is the closest)."""
    result = waits(
        {"gpu_requests": {"count": 8, "min_per_machine": 8}},
        {"gpu-01", "gpu-02"},
        machine("gpu-01", used_gpus=range(8)),
        machine("gpu-02"),
    )
    assert reasons_by_machine(result) == {
        "gpu-01": ["insufficient gpus: need 8, 0 free and usable"],
        "gpu-02": [HELD],
    }
    assert result.explanation.closest == "gpu-01"
    assert [(g.filter, g.code, g.room) for g in result.rejections] == [
        ("gpus", "InsufficientGPUs", True),
        ("accepting", "HeldForQueue", True),
    ]


def test_a_run_the_idle_cluster_cannot_hold_shows_no_hold() -> None:
    """A 32-GPU run on two 8-GPU machines, one held: the hold keeps nothing out that an idle
    cluster would let in, so it is not shown; the workspace is too small, and says so."""
    result = waits(
        {"gpu_requests": {"count": 32}}, {"gpu-01"}, machine("gpu-01"), machine("gpu-02")
    )
    text = "the workspace's machines have 16 GPUs that match; the run asks for 32"
    assert reasons_by_machine(result) == {"gpu-01": [text], "gpu-02": [text]}
    assert (result.headline, result.kind) == (text, ReasonKind.CLUSTER_TOO_SMALL)


def test_a_cordoned_held_machine_says_cordoned() -> None:
    """A cordon comes before the hold, as it always did."""
    result = waits(
        {"gpu_requests": {"count": 8}},
        {"gpu-01", "gpu-02"},
        machine("gpu-01", cordon="firmware update"),
        machine("gpu-02"),
    )
    assert reasons_by_machine(result) == {
        "gpu-01": ["machine is cordoned: firmware update"],
        "gpu-02": [HELD],
    }
    assert result.explanation.closest == "gpu-02"
