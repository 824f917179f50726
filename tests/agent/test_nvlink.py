"""The machine's NVLink domain from its GPUs' fabric info."""

import pytest

from astraeus.agent.backends import FabricSample, GpuSample
from astraeus.agent.topology.nvlink import gpu_domain, machine_domain
from astraeus.shared import Vendor

CLUSTER = "7b968a6d-c8aa-45e1-9e07-e1e51be99c31"


def _gpu(fabric: FabricSample | None, index: int = 0) -> GpuSample:
    return GpuSample(index=index, uuid=f"GPU-{index}", vendor=Vendor.NVIDIA, fabric=fabric)


@pytest.mark.parametrize(
    ("fabric", "domain"),
    [
        pytest.param(FabricSample(CLUSTER, 1, True, True), f"{CLUSTER}/1", id="completed"),
        pytest.param(FabricSample(CLUSTER, 1, False, True), None, id="in-progress"),
        pytest.param(FabricSample(CLUSTER, 1, True, False), None, id="status-failed"),
        pytest.param(FabricSample(None, 1, True, True), None, id="zero-cluster-uuid"),
        pytest.param(None, None, id="not-supported"),
    ],
)
def test_domain_only_when_fabric_is_set_up(fabric: FabricSample | None, domain: str | None) -> None:
    """A domain needs state completed, status success and a non-zero cluster UUID."""
    assert gpu_domain(_gpu(fabric)) == domain


def test_agreeing_gpus_share_the_domain() -> None:
    """GPUs that agree give the machine their domain and no warning."""
    gpus = [_gpu(FabricSample(CLUSTER, 1, True, True), i) for i in range(4)]
    assert machine_domain(gpus) == (f"{CLUSTER}/1", None)


def test_disagreeing_gpus_give_no_domain_and_a_warning() -> None:
    """GPUs in different cliques give no domain and a warning naming both."""
    gpus = [_gpu(FabricSample(CLUSTER, 1, True, True)), _gpu(FabricSample(CLUSTER, 2, True, True))]
    assert machine_domain(gpus) == (
        None,
        f"GPUs disagree on their NVLink domain ({CLUSTER}/1, {CLUSTER}/2); reporting none",
    )


def test_no_fabric_anywhere_is_quietly_no_domain() -> None:
    """A machine without multi-node NVLink has no domain and nothing to warn about."""
    assert machine_domain([_gpu(None), _gpu(None, 1)]) == (None, None)
