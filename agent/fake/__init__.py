"""Fake machines: whole, stateful machines from a documented TOML file (docs/agent.md) that drive
the agent's real code paths through a fake `pynvml`, a fake `amdsmi` and real sysfs/proc trees."""

from astraeus.shared.clock import SYSTEM_CLOCK, Clock

from .machine import FakeMachineError, FakeMachineSpec, read_spec, shipped_machines
from .state import FakeMachine


def load_fake_machine(
    name_or_path: str, *, clock: Clock = SYSTEM_CLOCK, name: str | None = None
) -> FakeMachine:
    """A shipped machine by name (`h100-sxm`, see `shipped_machines()`) or a file by path.
    `name` renames the machine, so several agents can run one file with distinct GPU UUIDs."""
    return FakeMachine(read_spec(name_or_path), clock=clock, name=name)


__all__ = [
    "FakeMachine",
    "FakeMachineError",
    "FakeMachineSpec",
    "load_fake_machine",
    "read_spec",
    "shipped_machines",
]
