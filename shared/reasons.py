"""The guide's reason texts. Public contract: change none without changing the guide.

Texts with numbers are functions, so every caller writes them the same way.
"""

from collections.abc import Collection, Sequence
from enum import StrEnum
from typing import Final

from .labels import RACK

NO_INFINIBAND_ROOM: Final = "no InfiniBand fabric has room for the whole run"
NO_RACK_LABEL: Final = f"no rack set on this machine ({RACK})"
UNDER_PRESSURE: Final = "under pressure: {condition}"


def no_machine_fits(ready: int, checked: int) -> str:
    """The headline when machines were checked and none takes the run."""
    return f"No machine fits: {ready} of {checked} machines ready"


def no_gpu_model(
    models: Sequence[str], min_memory_gb: float | None, vendor: str | None = None
) -> str:
    """`no H100 or H200 with at least 80 GB GPU`; `no H100 GPU`; `no GPU with at least 80 GB`."""
    what = " or ".join(models)
    if vendor and not models:
        what = vendor
    memory = f"with at least {_number(min_memory_gb)} GB" if min_memory_gb else ""
    if what and memory:
        return f"no {what} {memory} GPU"
    if what:
        return f"no {what} GPU"
    if memory:
        return f"no GPU {memory}"
    return "no GPU"


def insufficient_gpus(need: int, free: int) -> str:
    return f"insufficient gpus: need {need}, {free} free and usable"


def needs_healthy(need: int, free_healthy: int, free_at_risk: int) -> str:
    return f"needs {need} healthy GPUs, {free_healthy} free ({free_at_risk} more free but at risk)"


def cordoned(reason: str) -> str:
    return f"machine is cordoned: {reason}" if reason else "machine is cordoned"


def lacks_label(key: str, value: str) -> str:
    return f"machine lacks label {key}={value}"


def spans_sites(count: int, detail: str) -> str:
    """A gang larger than any one site; `detail` says how big the largest site is."""
    return (
        f"no single site can hold the whole run; it would span {count} sites (networks), {detail}"
    )


def under_pressure(condition: str) -> str:
    return UNDER_PRESSURE.format(condition=condition)


def cannot_distribute(gpus: int, machines: int) -> str:
    return f"Cannot plan workers: cannot evenly distribute {gpus} gpus across {machines} machines"


ANOTHER_WORKSPACE: Final = "a run of another workspace"
"""How a member is shown a run (or task) of a workspace other than its own: in queue reasons and
machine views. Admins see names."""


# Queue reasons: the run fits, and the queue holds it back.
def next_to_run(detail: str, expected: str | None = None) -> str:
    """`Next to run: <detail>`; with the head's expected start (`expected_start`), `Next to
    run, expected to start by 2026-12-07 14:05 UTC when runs on gpu-07, gpu-08 reach their time
    limits: <detail>`."""
    if expected is None:
        return f"Next to run: {detail}"
    return f"Next to run, {expected}: {detail}"


def expected_start(at: str, machines: Sequence[str]) -> str:
    """When the head's machines free up: every task on them reaches its time limit by `at`
    (`2026-12-07 14:05 UTC`); at most three machines named."""
    named = ", ".join(machines[:3]) + (
        f" and {len(machines) - 3} more" if len(machines) > 3 else ""
    )
    return f"expected to start by {at} when runs on {named} reach their time limits"


def queued_behind(run: str) -> str:
    return f"Queued behind {run}"


def waits_for_quota(used: float, quota: float, need: float, what: str = "GPUs") -> str:
    """`Waits for namespace quota: 6 of 8 GPUs in use, this run needs 4 more`; `what` is
    `GPUs`, `CPU cores` or `GiB of memory` (amounts to two decimals at most)."""
    used_, quota_, need_ = (f"{round(n, 2):g}" for n in (used, quota, need))
    return (
        f"Waits for namespace quota: {used_} of {quota_} {what} in use, this run needs {need_} more"
    )


CPU_CORES = "CPU cores"
GIB_OF_MEMORY = "GiB of memory"


def array_at_most(concurrency: int) -> str:
    return f"Array runs at most {concurrency} tasks at once"


def requeued_after_fault(attempt: int, attempts: int) -> str:
    """A run placed again after a fault, until a pass explains why it waits now."""
    return f"Requeued after a fault (attempt {attempt} of {attempts})"


PREEMPTED: Final = "Preempted by a higher-priority run"
"""A run stopped to make room for a run of higher priority, back in the queue with its
submission time kept. It never names the other run, which may be another workspace's."""


RECLAIMED: Final = "Reclaimed by a workspace within its guarantee"
"""A run of a workspace over its `guaranteed_gpus`, stopped so that a workspace below its own
guarantee gets its GPUs back; back in the queue like a preempted run, naming no one."""


def preempting(runs: int, gpus: int) -> str:
    """The reason of a run whose lower-priority victims are stopping for it (the head's hold
    keeps their machines for it meanwhile)."""
    return f"Next to run: preempting {_count(runs, 'run')}, {_count(gpus, 'GPU')}"


def preempting_leaving() -> str:
    """A preempting run whose victims were told to stop in an earlier pass."""
    return "Next to run: waits for the runs it preempted to stop"


def would_preempt(runs: int, gpus: int) -> str:
    """A dry run's answer when the run would start by preempting others."""
    return f"would start after preempting {_count(runs, 'run')}, {_count(gpus, 'GPU')}"


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


class ReasonKind(StrEnum):
    """What a waiting run's (or task's) `reason` is, as data: the API carries it next to the
    text as `reason_kind`, so no reader classifies the text again. Named as Kubernetes names a
    condition's reason."""

    NEXT_TO_RUN = "NextToRun"
    """`Next to run: …`: the head of the queue, waiting for room held for it."""
    QUEUED_BEHIND = "QueuedBehind"
    WAITS_FOR_QUOTA = "WaitsForQuota"
    ARRAY_LIMIT = "ArrayLimit"
    NO_MACHINE_FITS = "NoMachineFits"
    """`No machine fits: R of C machines ready`: machines give different reasons, or room."""
    SAME_REASON = "SameReason"
    """Every machine gives the same reason, not about room: the reason is that text."""
    NO_MACHINES = "NoMachines"
    """The workspace's pools hold no machine."""
    CLUSTER_TOO_SMALL = "ClusterTooSmall"
    """`the workspace's machines have 52 GPUs that match; the run asks for 128`: all of the
    workspace's machines together, idle, could not hold the run."""
    WAITS_FOR_NETWORK = "WaitsForNetwork"
    """The run waits, with `patience_seconds`, for a tighter rung of the ladder."""
    NOT_EVALUATED = "NotEvaluated"
    """The scheduler has not looked at the run yet (its `reason` is null) or not this pass."""
    REQUEUED = "Requeued"
    """`Requeued after a fault (attempt 2 of 4)`: a worker's GPU faulted or its machine was
    Lost (or it failed, with `retry_on_failure`), and the run waits to be placed again."""
    PREEMPTED = "Preempted"
    """`Preempted by a higher-priority run`: stopped to make room, and back in the queue."""
    RECLAIMED = "Reclaimed"
    """`Reclaimed by a workspace within its guarantee`: stopped so that a workspace below its
    `guaranteed_gpus` gets them back, and back in the queue."""
    PREEMPTING = "Preempting"
    """`Next to run: preempting 2 runs, 16 GPUs`: lower-priority runs stop for this one, whose
    machines are held for it meanwhile."""

    @property
    def is_queue(self) -> bool:
        """A queue reason: the queue holds the run back (the guide's pending reasons table)."""
        return self in QUEUE_KINDS

    @property
    def fits(self) -> bool:
        """The run fits now and only the queue holds it back: not the head, which waits for the
        room held for it."""
        return self.is_queue and self is not ReasonKind.NEXT_TO_RUN


class RejectionCode(StrEnum):
    """What keeps a machine out, as data: one code per kind of reason text of the filters, so
    readers of an explanation (`RejectionGroup.code`) tell reasons apart without their words."""

    # up
    NEVER_REPORTED = "NeverReported"
    MACHINE_DOWN = "MachineDown"
    NO_CAPACITY = "NoCapacity"
    UNDER_PRESSURE = "UnderPressure"
    # accepting
    CORDONED = "Cordoned"
    HELD_FOR_QUEUE = "HeldForQueue"
    RESERVED_FOR_LABELS = "ReservedForLabels"
    # capabilities
    NO_CONTAINER_RUNTIME = "NoContainerRuntime"
    """Runs with an image need a container runtime (podman or docker) on the machine."""
    LACKS_CAPABILITY = "LacksCapability"
    # selection
    NOT_NAMED = "NotNamed"
    LACKS_LABEL = "LacksLabel"
    NOT_IN_POOL = "NotInPool"
    """The run or the workspace selects a pool (`pool=…`) the machine is not in."""
    # spread
    WORKER_ALREADY_HERE = "WorkerAlreadyHere"
    # rdma
    NO_RDMA_PORT = "NoRdmaPort"
    # room
    INSUFFICIENT_CPU = "InsufficientCPU"
    INSUFFICIENT_MEMORY = "InsufficientMemory"
    # gpus
    NO_GPU_MODEL = "NoGPUModel"
    """No GPU of the model, vendor and memory asked."""
    INSUFFICIENT_GPUS = "InsufficientGPUs"
    NEEDS_HEALTHY_GPUS = "NeedsHealthyGPUs"
    TOO_FEW_GPUS = "TooFewGPUs"
    """The machine could never give that many, even idle."""
    NO_SUCH_GPU = "NoSuchGPU"
    GPU_FAULTED = "GPUFaulted"
    GPU_AT_RISK = "GPUAtRisk"
    GPU_IN_USE = "GPUInUse"
    # topology
    NO_RACK_LABEL = "NoRackLabel"
    NO_FABRIC = "NoFabric"
    NO_NVLINK_DOMAIN = "NoNVLinkDomain"
    NO_IMEX_CHANNEL = "NoIMEXChannel"
    """The machine is in an NVLink domain, but its IMEX channel is not available: the domain
    holds no run of several machines there (`interconnect: nvlink`, `keep_within:
    nvlink_domain`)."""
    CANNOT_PLAN_WORKERS = "CannotPlanWorkers"
    """No shape meets the run's rules: every machine gives it."""
    NO_ROOM_WITHIN = "NoRoomWithin"
    """No one machine, NVLink domain, fabric or rack (`keep_within`) has room for the run."""
    NO_INFINIBAND_ROOM = "NoInfiniBandRoom"
    NO_ROOM_ON_NETWORK = "NoRoomOnNetwork"
    """No NVLink domain or RDMA network (`interconnect`) has room for the run."""
    SPANS_SITES = "SpansSites"
    WHOLE_RUN_DOES_NOT_FIT = "WholeRunDoesNotFit"
    """The machines that pass every filter are too few, or have too little room, together."""
    CLUSTER_TOO_SMALL = "ClusterTooSmall"
    """The workspace's machines have fewer GPUs of the kind asked than the run asks for."""
    WAITS_FOR_TIGHTER_RUNG = "WaitsForTighterRung"
    """The machine could take the run now, but the run waits for a tighter rung."""
    # drives
    NO_SUCH_DRIVE = "NoSuchDrive"
    DRIVE_UNREACHABLE = "DriveUnreachable"
    NO_DATA_ROOM = "NoDataRoom"
    # reservations
    RESERVED_FOR_WORKSPACE = "ReservedForWorkspace"
    SOON_RESERVED = "SoonReserved"


QUEUE_KINDS: Final = frozenset(
    {
        ReasonKind.NEXT_TO_RUN,
        ReasonKind.QUEUED_BEHIND,
        ReasonKind.WAITS_FOR_QUOTA,
        ReasonKind.ARRAY_LIMIT,
    }
)


LASTING_CODES: Final = frozenset(
    {
        RejectionCode.NOT_NAMED,
        RejectionCode.LACKS_LABEL,
        RejectionCode.NOT_IN_POOL,
        RejectionCode.NO_CONTAINER_RUNTIME,
        RejectionCode.LACKS_CAPABILITY,
        RejectionCode.NO_RDMA_PORT,
        RejectionCode.NO_GPU_MODEL,
        RejectionCode.TOO_FEW_GPUS,
        RejectionCode.NO_RACK_LABEL,
        RejectionCode.NO_FABRIC,
        RejectionCode.NO_NVLINK_DOMAIN,
        RejectionCode.CANNOT_PLAN_WORKERS,
        RejectionCode.SPANS_SITES,
        RejectionCode.CLUSTER_TOO_SMALL,
        RejectionCode.NO_SUCH_DRIVE,
    }
)
"""Reasons about what the run asks against what a machine is (its GPUs, labels, pools, links,
drives), not about its state or what runs there now: none clears by itself."""


def never_fits(kind: ReasonKind | None, codes: Collection[str | None]) -> bool:
    """Whether a run waiting for `kind`, with its machines' rejection `codes`, could never be
    held by the workspace's machines as they are: together too small, no machine at all, or
    every machine refusing it for one lasting reason. It still waits (the machines may change);
    a client warns at once instead of letting it wait in silence."""
    if kind in (ReasonKind.CLUSTER_TOO_SMALL, ReasonKind.NO_MACHINES):
        return True
    return kind is ReasonKind.SAME_REASON and bool(codes) and set(codes) <= LASTING_CODES


def not_evaluated() -> str:
    """A dry run whose place in the queue is further than one pass looks."""
    return "not evaluated: the queue ahead is longer than one pass looks"


def _number(value: float | None) -> str:
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
