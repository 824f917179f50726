"""Where a machine sits on the network: rack, fabric, RDMA link layer and NVLink domain.

The `topology.astraeus.io/fabric` label wins; otherwise an InfiniBand fabric is the one its ports
report (the agent's derived name, else the subnet prefix). Machines with RDMA and no fabric count
as one fabric per link layer, InfiniBand and RoCE never mixed, only while no machine of the
cluster has a fabric label. NVLink domains come from the GPUs' reports only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from astraeus.shared import GpuHealthState, LinkLayer, MachineReport, RdmaPort, labels

IMPLICIT_FABRIC = {LinkLayer.INFINIBAND: "infiniband", LinkLayer.ETHERNET: "roce"}
"""Names of the one-per-link-layer fabrics of a cluster without fabric labels."""


@dataclass(frozen=True)
class NetworkPlace:
    """One machine's place on the network, for one run's `min_gbps`."""

    link: LinkLayer | None
    """Link layer of the RDMA ports that count (up, fast enough); None without such ports."""
    fabric: str | None
    rdma_at_risk: bool
    """Some port that counts is at risk."""


def counted_ports(report: MachineReport | None, min_gbps: float | None) -> list[RdmaPort]:
    """Ports that are up and, when the run asks for a speed, at least that fast. Omni-Path
    ports never count: workers are not given them (docs/decisions.md, "Omni-Path")."""
    if report is None:
        return []
    floor = min_gbps or 0
    return [
        port
        for port in report.rdma_ports
        if port.up and not port.omni_path and port.rate_gbps >= floor
    ]


def network_place(
    report: MachineReport | None, min_gbps: float | None, cluster_has_fabric_label: bool
) -> NetworkPlace:
    """The machine's RDMA link layer and fabric; InfiniBand ports win over RoCE ports."""
    ports = counted_ports(report, min_gbps)
    if report is None or not ports:
        return NetworkPlace(link=None, fabric=None, rdma_at_risk=False)
    link = _link(ports)
    mine = [port for port in ports if port.link_layer is link]
    at_risk = any(port.at_risk for port in mine)
    return NetworkPlace(link, _fabric(report, mine, link, cluster_has_fabric_label), at_risk)


def _link(ports: Sequence[RdmaPort]) -> LinkLayer:
    if any(port.link_layer is LinkLayer.INFINIBAND for port in ports):
        return LinkLayer.INFINIBAND
    return LinkLayer.ETHERNET


def _fabric(
    report: MachineReport, ports: Sequence[RdmaPort], link: LinkLayer, labelled: bool
) -> str | None:
    label = report.labels.get(labels.FABRIC)
    if label:
        return label
    if link is LinkLayer.INFINIBAND:
        # Sorted so a machine with ports on two subnets always lands in the same one.
        derived = sorted(port.fabric or port.subnet_prefix or "" for port in ports)
        named = [name for name in derived if name]
        if named:
            return named[0]
    return None if labelled else IMPLICIT_FABRIC[link]


def nvlink_domain(report: MachineReport | None) -> str | None:
    """The multi-node NVLink domain every usable GPU of the machine reports, if they agree."""
    if report is None:
        return None
    domains = {
        gpu.nvlink_domain for gpu in report.gpus if gpu.health.state is not GpuHealthState.FAULTED
    }
    if len(domains) != 1:
        return None
    return domains.pop()


def rack(report: MachineReport | None) -> str | None:
    return report.labels.get(labels.RACK) or None if report else None


def cluster_has_fabric_label(reports: Sequence[MachineReport | None]) -> bool:
    return any(report is not None and labels.FABRIC in report.labels for report in reports)
