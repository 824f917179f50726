"""The run's ask, `requested_resources`, field for field as the product guide writes it."""

from typing import Annotated, Self

from pydantic import AfterValidator, Field, StringConstraints, model_validator

from .base import INT64_MAX, UserModel
from .choices import (
    Capability,
    GpuPolicy,
    Interconnect,
    KeepWithin,
    SelectionMode,
    Spread,
    Vendor,
)
from .reasons import cannot_distribute

Number = int | float
"""Whole numbers stay whole, so a spec serialises back exactly as it was written."""

NonEmpty = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=253)]


class GpuRequests(UserModel):
    """Which GPUs, and how many for the whole run (not per worker)."""

    count: int = Field(default=0, ge=0, le=100_000)
    models: list[NonEmpty] = Field(default_factory=list, max_length=64)
    min_memory_gb: Number | None = Field(default=None, ge=0, le=100_000)
    vendor: Vendor | None = None
    healthy_only: bool = False
    min_per_machine: int | None = Field(default=None, ge=1, le=100_000)
    policy: GpuPolicy | None = None
    ids: list[NonEmpty] = Field(default_factory=list, max_length=1024)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.min_per_machine is not None and self.min_per_machine > self.count:
            raise ValueError(
                f"min_per_machine ({self.min_per_machine}) is more than count ({self.count}); "
                f"lower min_per_machine to at most {self.count}"
            )
        if self.ids and len(self.ids) != self.count:
            raise ValueError(
                f"ids pins {len(self.ids)} GPUs but count is {self.count}; "
                f"set count to {len(self.ids)}"
            )
        if len(set(self.ids)) != len(self.ids):
            raise ValueError("ids names a GPU more than once; list each GPU once")
        return self


class PerGpu(UserModel):
    """Cores and memory per GPU: a worker with 8 GPUs gets 8 times these."""

    cpu_cores: Number = Field(default=0, ge=0, le=100_000)
    memory_bytes: int = Field(default=0, ge=0, le=INT64_MAX)


class Topology(UserModel):
    min_nodes: int | None = Field(default=None, ge=1, le=100_000)
    max_nodes: int | None = Field(default=None, ge=1, le=100_000)
    keep_within: KeepWithin | None = None
    spread: Spread | None = None
    patience_seconds: int | None = Field(default=None, ge=0, le=7 * 24 * 3600)

    @model_validator(mode="after")
    def _range(self) -> Self:
        if (
            self.min_nodes is not None
            and self.max_nodes is not None
            and self.min_nodes > self.max_nodes
        ):
            raise ValueError(
                f"min_nodes ({self.min_nodes}) is more than max_nodes ({self.max_nodes}); "
                "make min_nodes at most max_nodes"
            )
        return self


class Network(UserModel):
    interconnect: Interconnect = Interconnect.AUTO
    min_gbps: Number | None = Field(default=None, ge=0, le=100_000)


class NodeSelection(UserModel):
    mode: SelectionMode = SelectionMode.EXACT
    names: list[NonEmpty] = Field(default_factory=list, max_length=10_000)
    match_labels: dict[NonEmpty, str] = Field(default_factory=dict)
    count: int | None = Field(default=None, ge=1, le=100_000)

    @model_validator(mode="after")
    def _unique_names(self) -> Self:
        seen: set[str] = set()
        for name in self.names:
            if name in seen:
                raise ValueError(f"names lists {name} more than once; list each machine once")
            seen.add(name)
        return self


MOUNT_PATH = r"^(/[A-Za-z0-9._@+-]+)+$"
"""An absolute path of plain parts: no comma or colon (they would add options to a container
runtime's mount), not `/` itself; `.` and `..` parts are refused by `_plain_parts`."""


def _plain_parts(path: str) -> str:
    if any(part in (".", "..") for part in path.split("/")):
        raise ValueError(f"{path!r} has a '.' or '..' part; write the path without them")
    return path


class DriveMount(UserModel):
    """A drive the run's workers mount; placement prefers machines that hold or are near it."""

    name: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")] = Field(
        description="the drive's name, as machines' agents are configured with it"
    )
    mount_path: Annotated[
        str, StringConstraints(pattern=MOUNT_PATH, max_length=4096), AfterValidator(_plain_parts)
    ] = Field(
        description="absolute path inside the worker's container: letters, digits and . _ - @ +"
        " between slashes, no `.` or `..` part"
    )
    size_bytes: int = Field(
        default=0,
        ge=0,
        le=INT64_MAX,
        description="room the drive needs at the machine's data location",
    )


class ArraySpec(UserModel):
    """An array run: `size` independent tasks, at most `concurrency` at once."""

    size: int = Field(ge=1, le=100_000)
    concurrency: int | None = Field(default=None, ge=1, le=100_000)


class RequestedResources(UserModel):
    """What a run asks for. Every field is optional; an empty ask is a one-worker CPU run."""

    gpu_requests: GpuRequests | None = None
    per_gpu: PerGpu | None = None
    cpu_cores: Number | None = Field(default=None, ge=0, le=100_000)
    memory_bytes: int | None = Field(default=None, ge=0, le=INT64_MAX)
    machines: int | None = Field(default=None, ge=1, le=100_000)
    network: Network | None = None
    topology: Topology | None = None
    node_selection: NodeSelection | None = None
    drives: list[DriveMount] = Field(default_factory=list, max_length=64)
    array: ArraySpec | None = None
    capabilities: list[Capability] = Field(default_factory=list)

    @property
    def gpu_count(self) -> int:
        return self.gpu_requests.count if self.gpu_requests else 0

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        topology = self.topology or Topology()
        if self.machines is not None and self.gpu_count and self.gpu_count % self.machines:
            raise ValueError(cannot_distribute(self.gpu_count, self.machines))
        machines = self.machines
        if (
            machines is not None
            and topology.max_nodes is not None
            and machines > topology.max_nodes
        ):
            raise ValueError(
                f"machines ({self.machines}) is more than topology.max_nodes "
                f"({topology.max_nodes}); raise max_nodes or lower machines"
            )
        if (
            machines is not None
            and topology.min_nodes is not None
            and machines < topology.min_nodes
        ):
            raise ValueError(
                f"machines ({self.machines}) is less than topology.min_nodes "
                f"({topology.min_nodes}); lower min_nodes or raise machines"
            )
        if self.per_gpu is not None and not self.gpu_count:
            raise ValueError(
                "per_gpu needs GPUs: set gpu_requests.count, or use cpu_cores and memory_bytes"
            )
        self._one_worker_per_element()
        names = {drive.name for drive in self.drives}
        if len(names) != len(self.drives):
            raise ValueError("drives lists a drive more than once; mount each drive once")
        return self

    def _one_worker_per_element(self) -> None:
        """Each array element is one worker with the run's per-worker ask: a worker count
        contradicts it."""
        if self.array is None:
            return
        topology, selection = self.topology or Topology(), self.node_selection or NodeSelection()
        for name, value in (
            ("machines", self.machines),
            ("node_selection.count", selection.count),
            ("topology.min_nodes", topology.min_nodes),
            ("topology.max_nodes", topology.max_nodes),
        ):
            if value is not None:
                raise ValueError(
                    f"{name} does not apply to an array run: each element is one worker; "
                    f"drop {name}, or drop array for one run of several workers"
                )
