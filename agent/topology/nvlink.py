"""The machine's multi-node NVLink domain, from GPU fabric info (docs/hardware.md §1.12)."""

from collections.abc import Sequence

from astraeus.agent.backends import GpuSample


def gpu_domain(sample: GpuSample) -> str | None:
    """`<cluster uuid>/<clique id>` when the fabric is set up: state completed, status success
    and a cluster UUID that is not zero; else None."""
    fabric = sample.fabric
    if fabric is None or not (fabric.completed and fabric.status_ok and fabric.cluster_uuid):
        return None
    return f"{fabric.cluster_uuid}/{fabric.clique_id}"


def machine_domain(samples: Sequence[GpuSample]) -> tuple[str | None, str | None]:
    """`(domain, warning)`: the one domain every GPU reports, or no domain and a warning when
    the GPUs of this machine disagree."""
    domains = {gpu_domain(s) for s in samples if not s.lost}
    if not domains or domains == {None}:
        return None, None
    if len(domains) == 1:
        return domains.pop(), None
    seen = ", ".join(sorted(d or "none" for d in domains))
    return None, f"GPUs disagree on their NVLink domain ({seen}); reporting none"
