"""The pending explanation serialises exactly as the guide's JSON example."""

import json
from datetime import UTC, datetime
from pathlib import Path

from astraeus.shared import NodeReasons, PendingExplanation, reasons

GUIDE_JSON = (Path(__file__).parent / "data" / "guide_pending.json").read_text()
"""The guide's `.placement` example, verbatim (shared with the placement engine's tests)."""


def test_guide_example_round_trips() -> None:
    """Parsing the guide's `.placement` and dumping it gives the same JSON, timestamp included."""
    parsed = PendingExplanation.model_validate_json(GUIDE_JSON)
    assert json.loads(parsed.model_dump_json()) == json.loads(GUIDE_JSON)


def test_built_from_reason_functions_matches_guide() -> None:
    """The reason functions write the guide's texts for the guide's three machines."""
    built = PendingExplanation(
        checked_nodes=3,
        ready_nodes=3,
        down_nodes=0,
        closest="gpu-02",
        nodes=[
            NodeReasons(
                name="gpu-01", state="Up", reasons=[reasons.no_gpu_model(["H100", "H200"], 80)]
            ),
            NodeReasons(name="gpu-02", state="Up", reasons=[reasons.insufficient_gpus(8, 4)]),
            NodeReasons(name="gpu-03", state="Up", reasons=[reasons.cordoned("firmware update")]),
        ],
        evaluated_at=datetime(2026, 10, 1, 9, 14, 2, 511843, tzinfo=UTC),
    )
    assert json.loads(built.model_dump_json()) == json.loads(GUIDE_JSON)
