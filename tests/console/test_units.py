"""Memory figures the console shows use the unit the asks use: GPU memory in GiB written GB, as
`min_memory_gb` compares it. Run in Node (skipped, saying so, when Node is not installed)."""

from __future__ import annotations

import json
import shutil
import subprocess
from importlib import resources

import pytest

from astraeus.coordinator.placement.gpu_match import least_memory_bytes

MIB = 1024**2
H100_BYTES = 81559 * MIB
"""What an H100 80GB reports: 81559 MiB, 79.6 GiB."""


def _gb(values: list[int]) -> list[str]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed: the console's pure functions run in it")
    dom = resources.files("astraeus.coordinator.console").joinpath("dom.js")
    script = (
        f"import {{ gb }} from {json.dumps('file://' + str(dom))};"
        f"console.log(JSON.stringify({json.dumps(values)}.map(gb)));"
    )
    done = subprocess.run(
        [node, "--input-type=module", "-e", script], capture_output=True, text=True, check=True
    )
    return list(json.loads(done.stdout))


def test_an_h100_shows_as_the_guide_writes_it() -> None:
    """An 80 GB H100 shows as 79.6 GB (not 86 GB, bytes / 1e9); 24 GiB shows as 24 GB."""
    assert _gb([H100_BYTES, 24 * 1024**3]) == ["79.6 GB", "24 GB"]


@pytest.mark.parametrize("card", [H100_BYTES, 48 * 1024**3 - 1, 81920 * MIB + 1], ids=str)
def test_asking_for_what_is_shown_always_matches(card: int) -> None:
    """The figure is rounded down, so `min_memory_gb` set to it (or to it plus the 0.5 of
    slack) never asks for more than the card has."""
    (shown,) = _gb([card])
    value = float(shown.removesuffix(" GB"))
    assert least_memory_bytes(value) <= card
    assert least_memory_bytes(round(value + 0.5, 1)) <= card
