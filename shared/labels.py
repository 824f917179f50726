"""Label keys that carry meaning to the scheduler."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # `astra run` loads this module; `typing` for mypy only
    from typing import Final

POOL: Final = "pool"
"""A workspace is granted machines by pool: machines carrying `pool=<name>`."""

SITE: Final = "topology.astraeus.io/site"
RACK: Final = "topology.astraeus.io/rack"
FABRIC: Final = "topology.astraeus.io/fabric"
