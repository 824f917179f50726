"""The closed sets of words the contract uses: GPU vendors, and the run's ask's choices
(`keep_within`, `spread`, `interconnect`, `mode`, capabilities, GPU policy). The run's ask, the
machine report, the agent's backends and `astra run`'s flags all take them from here. Standard
library only, so `astra --help` can offer them without loading pydantic."""

from enum import StrEnum


class Vendor(StrEnum):
    NVIDIA = "nvidia"
    AMD = "amd"
    INTEL = "intel"


class GpuPolicy(StrEnum):
    PER_NODE = "PerNode"
    """A power of two GPUs per worker, one worker per machine."""


class KeepWithin(StrEnum):
    NODE = "node"
    NVLINK_DOMAIN = "nvlink_domain"
    FABRIC = "fabric"
    RACK = "rack"


class Spread(StrEnum):
    NODE = "node"
    RACK = "rack"
    FABRIC = "fabric"


class Interconnect(StrEnum):
    AUTO = "auto"
    RDMA = "rdma"
    INFINIBAND = "infiniband"
    NVLINK = "nvlink"


class SelectionMode(StrEnum):
    ANY = "Any"
    EXACT = "Exact"
    ALL = "All"


class Capability(StrEnum):
    """Machine capabilities a run may require (filter 3 of the guide)."""

    CONTAINER = "container"
    OUTBOUND_POLICY = "outbound_policy"
    SANDBOX = "sandbox"
    OPENSHELL = "openshell"
    TOOL_GATEWAY = "tool_gateway"
