"""How every fake names a GPU: the agent's fake machines, the engine's fake clusters, the tests."""

import uuid


def gpu_uuid(machine: str, index: int) -> str:
    """`GPU-` and a UUIDv5 of `<machine>.gpu<index>`: shaped like NVML's, stable across runs,
    distinct between machines (docs/agent.md, *Fake machines*)."""
    return "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{machine}.gpu{index}"))
