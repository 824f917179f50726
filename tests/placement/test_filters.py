"""Each of the guide's 11 filters, one table row per reason text, through `place` on one machine.

A room reason (the machine falls short only on cores, memory or GPUs) makes that machine the
`closest`; any other reason leaves `closest` unset and, being every machine's reason, becomes
the headline.
"""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from astraeus.coordinator.placement import Pending, Placement, Reservation, place
from astraeus.coordinator.placement.filters import DYNAMIC, EARLY, FREE, LATE
from astraeus.coordinator.testing.fake_cluster import (
    gpu_uuid,
    gpus,
    machine,
    rdma_port,
    run,
    snapshot,
)
from astraeus.shared import DriveInfo, MachineState, PressureCondition

NOW = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
GIB = 1024**3
ONE_GPU = {"gpu_requests": {"count": 1}}


def row(
    id_: str,
    text: str,
    *,
    room: bool = False,
    ask: dict[str, Any] | None = None,
    run_fields: dict[str, Any] | None = None,
    **machine_fields: Any,
) -> Any:
    return pytest.param(machine_fields, ask or ONE_GPU, run_fields or {}, text, room, id=id_)


ROWS = [
    row("1-never-reported", "machine has not reported", reported=False),
    row("1-down", "machine is down", state=MachineState.DOWN),
    row("1-no-capacity", "machine reports no cores or memory", cpu_cores=0),
    row(
        "1-memory-pressure",
        "under pressure: MemoryPressure",
        conditions=[PressureCondition.MEMORY],
    ),
    row("1-disk-pressure", "under pressure: DiskPressure", conditions=[PressureCondition.DISK]),
    row("2-cordoned", "machine is cordoned: firmware update", cordon="firmware update"),
    row("2-cordoned-no-reason", "machine is cordoned", cordon=""),
    row(
        "2-reserved-for-labels",
        "machine is reserved for runs selecting team=nlp",
        reservations=[Reservation(labels={"team": "nlp"})],
    ),
    row(
        "3-container",
        "machine lacks capability container",
        capabilities=[],
        run_fields={"image": "nvcr.io/nvidia/pytorch:24.08-py3"},
    ),
    row(
        "3-sandbox",
        "machine lacks capability sandbox",
        ask={"capabilities": ["sandbox"]},
    ),
    row(
        "4-names",
        "machine is not among the run's names",
        ask={"node_selection": {"names": ["gpu-02"]}},
    ),
    row(
        "4-match-labels",
        "machine lacks label pool=h100",
        ask={"node_selection": {"match_labels": {"pool": "h100"}}},
    ),
    row("4-workspace-pool", "machine lacks label pool=h100", run_fields={"pools": ("h100",)}),
    row(
        "4-workspace-pools",
        "machine is in none of the workspace's pools: pool=a100, pool=h100",
        run_fields={"pools": ("a100", "h100")},
    ),
    row("5-no-rdma", "no RDMA port up", ask={"network": {"interconnect": "rdma"}}),
    row(
        "5-slow-infiniband",
        "no InfiniBand port up at 400 Gb/s or faster",
        ask={"network": {"interconnect": "infiniband", "min_gbps": 400}},
        ports=[rdma_port(gbps=200)],
    ),
    row(
        "5-roce-is-not-infiniband",
        "no InfiniBand port up",
        ask={"network": {"interconnect": "infiniband"}},
        ports=[rdma_port(roce=True)],
    ),
    row(
        "5-omni-path-is-not-rdma-for-nccl",
        "no RDMA port up",
        ask={"network": {"interconnect": "rdma"}},
        ports=[rdma_port(device="hfi1_0", gbps=100).model_copy(update={"omni_path": True})],
    ),
    row(
        "6-spread",
        "a worker of this run is already on this machine",
        workers=[("vision", "run")],
    ),
    row(
        "7-cpu",
        "insufficient cpu: need 12, 8 free",
        room=True,
        ask={"cpu_cores": 12},
        used_cores=88,
    ),
    row(
        "7-memory",
        "insufficient memory: need 120 GiB, 24 GiB free",
        room=True,
        ask={"gpu_requests": {"count": 1}, "per_gpu": {"memory_bytes": 120 * GIB}},
        used_memory_gib=1000,
    ),
    row("7-never-fits", "insufficient cpu: need 200, 96 free", ask={"cpu_cores": 200}),
    row(
        "8-model",
        "no H200 GPU",
        ask={"gpu_requests": {"count": 1, "models": ["H200"]}},
    ),
    row(
        "8-vendor",
        "no amd GPU",
        ask={"gpu_requests": {"count": 1, "vendor": "amd"}},
    ),
    row(
        "8-memory",
        "no GPU with at least 141 GB",
        ask={"gpu_requests": {"count": 1, "min_memory_gb": 141}},
    ),
    row(
        "8-insufficient",
        "insufficient gpus: need 8, 4 free and usable",
        room=True,
        ask={"gpu_requests": {"count": 8, "min_per_machine": 8}},
        used_gpus=range(4),
    ),
    row(
        "8-too-few",
        "machine has too few gpus: need 16, it has 8 usable",
        ask={"gpu_requests": {"count": 16, "min_per_machine": 16}},
    ),
    row(
        "8-faulted-do-not-count",
        "machine has too few gpus: need 8, it has 7 usable",
        ask={"gpu_requests": {"count": 8, "min_per_machine": 8}},
        gpu_list=gpus("m", 8, faulted=[3]),
    ),
    row(
        "8-healthy-only",
        "needs 8 healthy GPUs, 6 free (2 more free but at risk)",
        ask={"gpu_requests": {"count": 8, "healthy_only": True}},
        gpu_list=gpus("m", 8, at_risk=[0, 1]),
    ),
    row(
        "8-pinned-missing",
        "no GPU 9 on this machine",
        ask={"gpu_requests": {"count": 1, "ids": ["9"]}},
    ),
    row(
        "8-pinned-faulted",
        "GPU 2 is faulted",
        ask={"gpu_requests": {"count": 1, "ids": ["2"]}},
        gpu_list=gpus("m", 8, faulted=[2]),
    ),
    row(
        "8-pinned-in-use",
        f"GPU {gpu_uuid('m', 2)} is in use",
        room=True,
        ask={"gpu_requests": {"count": 1, "ids": [gpu_uuid("m", 2)]}},
        used_gpus=[2],
    ),
    row(
        "9-rack",
        "no rack set on this machine (topology.astraeus.io/rack)",
        ask={"topology": {"keep_within": "rack"}},
    ),
    row(
        "9-fabric",
        "no fabric known for this machine (topology.astraeus.io/fabric, or an InfiniBand subnet)",
        ask={"topology": {"spread": "fabric"}},
    ),
    row(
        "9-nvlink-domain",
        "machine is in no NVLink domain",
        ask={"topology": {"keep_within": "nvlink_domain"}},
    ),
    row(
        "10-no-such-drive",
        "drive datasets does not exist",
        ask={"drives": [{"name": "datasets", "mount_path": "/data"}]},
    ),
    row(
        "10-drive-unreachable-now",
        "drive datasets is not reachable from this machine",
        ask={"drives": [{"name": "datasets", "mount_path": "/data"}]},
        drives=[DriveInfo(name="datasets", path="/mnt/nfs", local=False, reachable=False)],
    ),
    row(
        "10-drive-data-room",
        "drives need 500 GiB at the data location, 100 GiB free",
        ask={"drives": [{"name": "datasets", "mount_path": "/data", "size_bytes": 500 * GIB}]},
        drives=[DriveInfo(name="datasets", local=False)],
        data_free_gib=100,
    ),
    row(
        "11-reserved-for-workspace",
        "machine is reserved for workspace audio until 2026-10-01T10:00:00+00:00",
        reservations=[Reservation(workspace="audio", ends_at=NOW + timedelta(hours=1))],
    ),
    row(
        "11-soon-reserved",
        "machine is reserved for workspace audio from 2026-10-01T10:00:00+00:00, "
        "and the run has no time limit that ends before then",
        reservations=[Reservation(workspace="audio", starts_at=NOW + timedelta(hours=1))],
    ),
]


@pytest.mark.parametrize(("machine_fields", "ask", "run_fields", "text", "room"), ROWS)
def test_filter_reason(
    machine_fields: dict[str, Any],
    ask: dict[str, Any],
    run_fields: dict[str, Any],
    text: str,
    room: bool,
) -> None:
    """The filter rejects the machine with its exact text; a room reason makes it `closest`.
    A machine outside the workspace's pools is never listed: the text is the headline."""
    result = place(run(ask=ask, **run_fields), snapshot(machine("m", **machine_fields)), NOW)
    assert isinstance(result, Pending)
    if run_fields.get("pools"):
        assert (result.explanation.nodes, result.headline) == ([], text)
        return
    assert result.explanation.nodes[0].reasons == [text]
    assert result.explanation.closest == ("m" if room else None)
    ready = result.explanation.ready_nodes
    headline = text if ready and not room else f"No machine fits: {ready} of 1 machines ready"
    assert result.headline == headline


def test_down_machine_counts_as_down_and_is_listed() -> None:
    """A machine that never reported is Down: counted in `down_nodes`, listed with state Down."""
    result = place(run(ask=ONE_GPU), snapshot(machine("m", reported=False)), NOW)
    assert isinstance(result, Pending)
    assert (result.explanation.ready_nodes, result.explanation.down_nodes) == (0, 1)
    assert result.explanation.nodes[0].state is MachineState.DOWN
    assert result.headline == "No machine fits: 0 of 1 machines ready"


def test_first_rejecting_filter_wins() -> None:
    """A cordoned machine under memory pressure reports the pressure: the `up` filter comes
    first."""
    sick = machine("m", cordon="firmware update", conditions=[PressureCondition.MEMORY])
    result = place(run(ask=ONE_GPU), snapshot(sick), NOW)
    assert isinstance(result, Pending)
    assert result.explanation.nodes[0].reasons == ["under pressure: MemoryPressure"]


def landed(result: Placement | Pending) -> list[tuple[str, tuple[str, ...]]]:
    """Where each worker went: its machine and GPUs."""
    assert isinstance(result, Placement), result
    return [(worker.machine, worker.gpu_ids) for worker in result.workers]


def test_selected_label_reservation_admits_the_run() -> None:
    """A run whose `match_labels` select a reservation's labels may use the machine."""
    reserved = machine("m", labels_={"team": "nlp"}, reservations=[Reservation({"team": "nlp"})])
    ask = {"gpu_requests": {"count": 1}, "node_selection": {"match_labels": {"team": "nlp"}}}
    assert landed(place(run(ask=ask), snapshot(reserved), NOW)) == [("m", (gpu_uuid("m", 0),))]


def test_time_limit_that_ends_before_a_reservation_admits_the_run() -> None:
    """A run whose time limit ends before another workspace's reservation starts may run."""
    soon = Reservation(workspace="audio", starts_at=NOW + timedelta(hours=1))
    result = place(
        run(ask=ONE_GPU, time_limit_seconds=1800), snapshot(machine("m", reservations=[soon])), NOW
    )
    assert landed(result) == [("m", (gpu_uuid("m", 0),))]


def test_own_workspace_reservation_admits_the_run() -> None:
    """A machine reserved for the run's own workspace takes it."""
    mine = Reservation(workspace="vision", ends_at=NOW + timedelta(hours=1))
    result = place(run(ask=ONE_GPU), snapshot(machine("m", reservations=[mine])), NOW)
    assert landed(result) == [("m", (gpu_uuid("m", 0),))]


def test_mode_any_lets_workers_share_a_machine_with_the_run() -> None:
    """With `mode: Any` a machine already running a worker of the run is not filtered."""
    ask = {"gpu_requests": {"count": 1}, "node_selection": {"mode": "Any"}}
    result = place(run(ask=ask), snapshot(machine("m", workers=[("vision", "run")])), NOW)
    assert landed(result) == [("m", (gpu_uuid("m", 0),))]


def test_the_spread_rule_applies_per_array_element() -> None:
    """An array element (Exact mode) may go where another element of its run already is; a
    worker of a run placed whole may not."""
    snap = snapshot(machine("m", workers=[("vision", "run")]))
    element = run(ask={"cpu_cores": 1, "array": {"size": 3}}, array_index=1)
    assert landed(place(element, snap, NOW)) == [("m", ())]
    whole = place(run(ask={"cpu_cores": 1}), snap, NOW)
    assert isinstance(whole, Pending)
    assert whole.explanation.nodes[0].reasons == ["a worker of this run is already on this machine"]


def test_filters_are_split_by_what_they_declare_they_read() -> None:
    """Static verdicts are kept for the filters that read only what a machine is; spread, room
    and GPUs are decided per run; an idle cluster skips spread, which reads the run's workers."""
    names = [[name for name, _check in part] for part in (EARLY, DYNAMIC, FREE, LATE)]
    assert names == [
        ["up", "accepting", "capabilities", "selection", "rdma"],
        ["spread", "room", "gpus"],
        ["room", "gpus"],
        ["topology", "drives", "reservations"],
    ]
