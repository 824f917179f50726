"""A run with automatic shape that no shape fits is explained machine by machine against the
part of the run that machine would take, never as if one machine had to take everything; and
when the workspace's machines together have too few GPUs of the kind asked, that is the
headline (issue 26, item 3)."""

from datetime import UTC, datetime
from typing import Any

import pytest

from astraeus.coordinator.placement import Pending, place
from astraeus.coordinator.testing.fake_cluster import gpus, machine, rdma_port, run, snapshot
from astraeus.shared import DriveInfo
from astraeus.shared.reasons import ReasonKind

NOW = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
GIB = 1024**3
DATASETS = {"name": "datasets", "mount_path": "/data"}
REACHED = [DriveInfo(name="datasets", path="/mnt/nfs", local=False)]
GONE = [DriveInfo(name="datasets", path="/mnt/nfs", local=False, reachable=False)]


def pending(ask: dict[str, Any], *machines: Any) -> Pending:
    result = place(run(ask=ask), snapshot(*machines), NOW)
    assert isinstance(result, Pending)
    return result


def reasons_by_machine(result: Pending) -> dict[str, list[str]]:
    return {node.name: node.reasons for node in result.explanation.nodes}


def test_a_machine_without_the_drive_says_so_with_automatic_shape() -> None:
    """A 2-GPU run over two 1-GPU machines, b unable to reach the run's drive: b says so and a
    says what the whole run lacks, exactly as with `machines: 2`; never `too few gpus: need 2`."""
    machines = (
        machine("a", gpu_count=1, drives=REACHED),
        machine("b", gpu_count=1, drives=GONE),
    )
    expected = {
        "a": ["the whole run does not fit: need 2 GPUs, 1 free and usable on 1 machine"],
        "b": ["drive datasets is not reachable from this machine"],
    }
    automatic = pending({"gpu_requests": {"count": 2}, "drives": [DATASETS]}, *machines)
    fixed = pending({"gpu_requests": {"count": 2}, "drives": [DATASETS], "machines": 2}, *machines)
    assert reasons_by_machine(automatic) == reasons_by_machine(fixed) == expected
    assert (automatic.headline, automatic.kind) == (
        "No machine fits: 2 of 2 machines ready",
        ReasonKind.NO_MACHINE_FITS,
    )
    assert automatic.explanation.closest is None


GUIDE_64: dict[str, Any] = {
    "gpu_requests": {"count": 64, "min_per_machine": 8},
    "per_gpu": {"cpu_cores": 12, "memory_bytes": 128849018880},
}
GUIDE_64_RULES: dict[str, Any] = {
    **GUIDE_64,
    "network": {"interconnect": "infiniband", "min_gbps": 400},
    "topology": {"keep_within": "rack", "patience_seconds": 1800},
}


@pytest.mark.parametrize("ask", [GUIDE_64, GUIDE_64_RULES], ids=["sizes", "with-its-rules"])
def test_the_guide_s_64_gpu_run_on_three_machines_says_the_cluster_is_too_small(
    ask: dict[str, Any],
) -> None:
    """The guide's 64-GPU ask (min_per_machine 8, 12 cores per GPU; and with its network and
    topology rules) on three 8-GPU, 96-core InfiniBand machines in one rack: each could take
    an 8-GPU worker (96 cores), so none reads `insufficient cpu: need 768, 96 free`; the
    workspace has 24 GPUs for a 64-GPU run, and that is the reason."""
    port = [rdma_port(subnet="fe80::")]
    machines = (machine(f"gpu-0{i}", cpu_cores=96, rack="r1", ports=port) for i in (1, 2, 3))
    result = pending(ask, *machines)
    text = "the workspace's machines have 24 GPUs that match; the run asks for 64"
    assert reasons_by_machine(result) == {f"gpu-0{i}": [text] for i in (1, 2, 3)}
    assert (result.headline, result.kind) == (text, ReasonKind.CLUSTER_TOO_SMALL)
    assert result.explanation.closest is None
    assert [(group.filter, group.code, group.room) for group in result.rejections] == [
        ("topology", "ClusterTooSmall", False)
    ]


def test_a_run_larger_than_the_workspace_says_how_many_gpus_match() -> None:
    """A 128-GPU H100 run on 52 H100 GPUs (six 8-GPU machines, one cordoned, and a 4-GPU one)
    and an A100 machine: the headline counts the H100s, the cordoned machine's included (it
    is still the workspace's); the cordoned and A100 machines keep their own reasons. gpu-01,
    half in use, reads the same as the others: no room that frees up would change anything."""
    machines = [
        machine(f"gpu-0{i}", cordon="firmware update" if i == 2 else None) for i in range(6)
    ]
    machines[1] = machine("gpu-01", used_gpus=range(4))
    machines += [machine("gpu-06", gpu_count=4), machine("a100", model="NVIDIA A100-SXM4-80GB")]
    result = pending({"gpu_requests": {"count": 128, "models": ["H100"]}}, *machines)
    text = "the workspace's machines have 52 GPUs that match; the run asks for 128"
    found = reasons_by_machine(result)
    assert found == {
        "a100": ["no H100 GPU"],
        "gpu-00": [text],
        "gpu-01": [text],
        "gpu-02": ["machine is cordoned: firmware update"],
        "gpu-03": [text],
        "gpu-04": [text],
        "gpu-05": [text],
        "gpu-06": [text],
    }
    assert (result.headline, result.kind) == (text, ReasonKind.CLUSTER_TOO_SMALL)
    assert result.explanation.closest is None


def test_one_gpu_that_matches_is_singular() -> None:
    """`1 GPU that matches`, not `1 GPUs that match`."""
    result = pending({"gpu_requests": {"count": 2}}, machine("a", gpu_count=1))
    text = "the workspace's machines have 1 GPU that matches; the run asks for 2"
    assert (result.headline, reasons_by_machine(result)) == (text, {"a": [text]})


def test_split_runs_name_the_shape_the_machines_come_nearest_to() -> None:
    """16 GPUs over machines of 8, 4, 2 and 2 GPUs: enough GPUs, but no even split fits. The
    reason names the shape the machines come nearest to holding (2 × 8: one of two), not
    `machine has too few gpus: need 16` on each."""
    machines = (
        machine("a"),
        machine("b", gpu_count=4),
        machine("c", gpu_count=2),
        machine("d", gpu_count=2),
    )
    result = pending({"gpu_requests": {"count": 16}}, *machines)
    text = "the whole run does not fit: need 2 machines with room for a 8-GPU worker, 1 has it"
    assert reasons_by_machine(result) == {name: [text] for name in "abcd"}
    assert (result.headline, result.kind) == (text, ReasonKind.SAME_REASON)


def test_a_machine_is_judged_at_the_largest_part_it_could_take() -> None:
    """A 16-GPU run, 12 cores per GPU, on a 16-GPU machine with 48 cores and an 8-GPU one that
    cannot reach the drive: the first could take a 4-GPU worker (48 cores), so it is never
    told `insufficient cpu: need 192, 48 free`; what it can give counts its cores."""
    ask = {
        "gpu_requests": {"count": 16},
        "per_gpu": {"cpu_cores": 12},
        "drives": [DATASETS],
    }
    machines = (
        machine("a", gpu_count=16, cpu_cores=48, drives=REACHED),
        machine("b", drives=GONE),
    )
    result = pending(ask, *machines)
    assert reasons_by_machine(result) == {
        "a": ["the whole run does not fit: need 16 GPUs, 4 free and usable on 1 machine"],
        "b": ["drive datasets is not reachable from this machine"],
    }


def test_healthy_only_still_names_the_gpus_at_risk() -> None:
    """The guide's example stays: one 8-GPU machine, 2 at risk, an 8-GPU `healthy_only` run:
    the machine's part is all 8 GPUs, and it says `needs 8 healthy GPUs, 6 free (2 more free
    but at risk)` (its GPUs at risk still match: they are not counted out of the cluster)."""
    risky = gpus("gpu-01", 8, at_risk=(6, 7))
    result = pending(
        {"gpu_requests": {"count": 8, "healthy_only": True}}, machine("gpu-01", gpu_list=risky)
    )
    text = "needs 8 healthy GPUs, 6 free (2 more free but at risk)"
    assert (result.headline, reasons_by_machine(result)) == (text, {"gpu-01": [text]})


def test_one_other_reason_on_every_machine_stays_the_headline() -> None:
    """When every machine gives one reason that is not room (`min_per_machine` above what any
    machine has), that reason is the headline, as the guide says, even though the workspace
    is also too small."""
    ask = {"gpu_requests": {"count": 32, "min_per_machine": 16}}
    result = pending(ask, machine("a"), machine("b"))
    text = "machine has too few gpus: need 16, it has 8 usable"
    assert reasons_by_machine(result) == {"a": [text], "b": [text]}
    assert (result.headline, result.kind) == (text, ReasonKind.SAME_REASON)


def test_no_gpu_of_the_model_is_not_a_cluster_too_small() -> None:
    """No GPU of the model anywhere: the machines' `no B200 GPU` is the headline, not `0 GPUs
    that match`."""
    result = pending({"gpu_requests": {"count": 16, "models": ["B200"]}}, machine("a"))
    assert (result.headline, result.kind) == ("no B200 GPU", ReasonKind.SAME_REASON)
