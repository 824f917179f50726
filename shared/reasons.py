"""The guide's reason texts. Public contract: change none without changing the guide.

Texts with numbers are functions, so every caller writes them the same way.
"""

from collections.abc import Sequence
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
def next_to_run(detail: str) -> str:
    return f"Next to run: {detail}"


def queued_behind(run: str) -> str:
    return f"Queued behind {run}"


def waits_for_quota(used: int, quota: int, need: int) -> str:
    return f"Waits for namespace quota: {used} of {quota} GPUs in use, this run needs {need} more"


def array_at_most(concurrency: int) -> str:
    return f"Array runs at most {concurrency} tasks at once"


QUEUE_PREFIXES: Final = (
    "Next to run",
    "Queued behind",
    "Waits for namespace quota:",
    "Array runs at most",
)


def is_queue_reason(reason: str) -> bool:
    return reason.startswith(QUEUE_PREFIXES)


def _number(value: float | None) -> str:
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
