"""How a pending explanation reads: headline, closest, and what data does to the choice."""

from datetime import UTC, datetime

from astraeus.coordinator.placement import Pending, Placement, Reservation, place
from astraeus.coordinator.testing.fake_cluster import gpus, machine, run, snapshot
from astraeus.shared import DriveInfo, MachineState
from astraeus.shared.reasons import ReasonKind

NO_MACHINES, SAME_REASON = ReasonKind.NO_MACHINES, ReasonKind.SAME_REASON
FITS_NONE = ReasonKind.NO_MACHINE_FITS

NOW = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
EIGHT = {"gpu_requests": {"count": 8, "min_per_machine": 8}}


def test_one_non_room_reason_everywhere_is_the_headline() -> None:
    """When no machine is in the workspace's pool, that is the headline, naming no machine."""
    snap = snapshot(machine("a"), machine("b"), machine("c"))
    result = place(run(ask=EIGHT, pools=("h100",)), snap, NOW)
    assert isinstance(result, Pending)
    assert (result.headline, result.kind) == ("machine lacks label pool=h100", NO_MACHINES)
    assert (result.explanation.checked_nodes, result.explanation.nodes) == (0, [])
    assert result.explanation.closest is None


def test_a_workspace_never_sees_machines_outside_its_pools() -> None:
    """Machines outside the workspace's pools are not checked, counted, named or closest."""
    h100 = {"pool": "h100"}
    snap = snapshot(
        machine("a", labels_=h100, used_gpus=range(4)),
        machine("b", labels_={"pool": "vault"}),
        machine("c", labels_=h100, state=MachineState.DOWN),
    )
    result = place(run(ask=EIGHT, pools=("h100",)), snap, NOW)
    assert isinstance(result, Pending)
    explanation = result.explanation
    assert [node.name for node in explanation.nodes] == ["a", "c"]
    counts = (explanation.checked_nodes, explanation.ready_nodes, explanation.down_nodes)
    assert (counts, explanation.closest) == ((2, 1, 1), "a")
    assert (result.headline, result.kind) == ("No machine fits: 1 of 2 machines ready", FITS_NONE)


def test_a_down_machine_breaks_the_common_reason() -> None:
    """With one machine down, the headline counts ready machines instead."""
    snap = snapshot(machine("a"), machine("b", state=MachineState.DOWN))
    selects = {**EIGHT, "node_selection": {"match_labels": {"pool": "h100"}}}
    result = place(run(ask=selects), snap, NOW)
    assert isinstance(result, Pending)
    assert (result.headline, result.kind) == ("No machine fits: 1 of 2 machines ready", FITS_NONE)
    assert (result.explanation.ready_nodes, result.explanation.down_nodes) == (1, 1)


def test_every_ready_machine_giving_one_reason_is_that_reason_as_data() -> None:
    """When every machine gives the same reason, not about room, the headline is that reason and
    its kind says so."""
    snap = snapshot(machine("a"), machine("b"))
    selects = {**EIGHT, "node_selection": {"match_labels": {"pool": "h100"}}}
    result = place(run(ask=selects), snap, NOW)
    assert isinstance(result, Pending)
    assert (result.headline, result.kind) == ("machine lacks label pool=h100", SAME_REASON)


def test_closest_has_the_largest_share_of_its_need() -> None:
    """Of two machines short on GPUs, the one with more free is the closest."""
    snap = snapshot(machine("a", used_gpus=range(6)), machine("b", used_gpus=range(3)))
    result = place(run(ask=EIGHT), snap, NOW)
    assert isinstance(result, Pending)
    assert result.explanation.closest == "b"
    assert result.wanted_machines == ("a",)


def test_no_closest_when_room_could_never_be_enough() -> None:
    """A machine short on GPUs it could never have is not the closest."""
    snap = snapshot(machine("a", gpu_count=4, used_gpus=[0]))
    result = place(run(ask=EIGHT), snap, NOW)
    assert isinstance(result, Pending)
    assert result.explanation.closest is None
    assert result.headline == "machine has too few gpus: need 8, it has 4 usable"


def test_a_mounted_drive_draws_the_worker_to_its_machine() -> None:
    """Between two equal machines, the one holding the run's drive wins (+40)."""
    ask = {"gpu_requests": {"count": 1}, "drives": [{"name": "ckpt", "mount_path": "/ckpt"}]}
    snap = snapshot(
        machine("a", drives=[DriveInfo(name="ckpt", local=False)]),
        machine("b", drives=[DriveInfo(name="ckpt")]),
    )
    result = place(run(ask=ask), snap, NOW)
    assert isinstance(result, Placement)
    assert result.landing.machines == ["b"]


def test_a_machine_reserved_for_the_runs_labels_wins() -> None:
    """A run selecting a label reservation prefers the reserved machine (+95)."""
    ask = {"gpu_requests": {"count": 1}, "node_selection": {"match_labels": {"team": "nlp"}}}
    labels = {"team": "nlp"}
    snap = snapshot(
        machine("a", labels_=labels),
        machine("b", labels_=labels, reservations=[Reservation(labels=labels)]),
    )
    result = place(run(ask=ask), snap, NOW)
    assert isinstance(result, Placement)
    assert result.landing.machines == ["b"]


def test_healthy_only_gang_takes_no_gpu_at_risk() -> None:
    """A healthy-only 16-GPU run skips a machine whose free GPUs are at risk."""
    risky = machine("a", gpu_list=gpus("a", 8, at_risk=[0]))
    ask = {"gpu_requests": {"count": 16, "healthy_only": True}}
    result = place(run(ask=ask), snapshot(risky, machine("b"), machine("c")), NOW)
    assert isinstance(result, Placement)
    assert result.landing.machines == ["b", "c"]
