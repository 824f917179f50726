"""GPU vendors: the one list the run's ask, the machine report, the agent's backends and
`astra run --vendor` take their choices from. Standard library only, so `astra --help` can name
them without loading pydantic."""

from enum import StrEnum


class Vendor(StrEnum):
    NVIDIA = "nvidia"
    AMD = "amd"
    INTEL = "intel"
