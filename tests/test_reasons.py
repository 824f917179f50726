"""The guide's reason texts, written by one function each."""

from pathlib import Path

import pytest

from astraeus.shared import reasons

CASES = [
    pytest.param(
        reasons.no_machine_fits(3, 3), "No machine fits: 3 of 3 machines ready", id="headline"
    ),
    pytest.param(reasons.no_gpu_model(["H100"], None), "no H100 GPU", id="model"),
    pytest.param(
        reasons.no_gpu_model(["H100", "H200"], 80),
        "no H100 or H200 with at least 80 GB GPU",
        id="model-memory",
    ),
    pytest.param(reasons.no_gpu_model([], 40.5), "no GPU with at least 40.5 GB", id="memory-only"),
    pytest.param(reasons.no_gpu_model([], None, "amd"), "no amd GPU", id="vendor"),
    pytest.param(
        reasons.insufficient_gpus(8, 4), "insufficient gpus: need 8, 4 free and usable", id="room"
    ),
    pytest.param(
        reasons.needs_healthy(8, 6, 2),
        "needs 8 healthy GPUs, 6 free (2 more free but at risk)",
        id="healthy-only",
    ),
    pytest.param(
        reasons.cordoned("firmware update"), "machine is cordoned: firmware update", id="cordon"
    ),
    pytest.param(reasons.lacks_label("pool", "h100"), "machine lacks label pool=h100", id="label"),
    pytest.param(
        reasons.under_pressure("MemoryPressure"), "under pressure: MemoryPressure", id="pressure"
    ),
    pytest.param(
        reasons.NO_RACK_LABEL, "no rack set on this machine (topology.astraeus.io/rack)", id="rack"
    ),
    pytest.param(
        reasons.cannot_distribute(12, 5),
        "Cannot plan workers: cannot evenly distribute 12 gpus across 5 machines",
        id="distribute",
    ),
    pytest.param(
        reasons.spans_sites(2, "the largest holds 32 of 64 GPUs"),
        "no single site can hold the whole run; it would span 2 sites (networks), "
        "the largest holds 32 of 64 GPUs",
        id="sites",
    ),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_reason_text(text: str, expected: str) -> None:
    """Each function writes the guide's text exactly."""
    assert text == expected


def test_queue_kinds_are_the_guides_four_queue_reasons() -> None:
    """The queue kinds are exactly the four queue reasons of the guide's table."""
    queue = {kind for kind in reasons.ReasonKind if kind.is_queue}
    assert queue == {
        reasons.ReasonKind.NEXT_TO_RUN,
        reasons.ReasonKind.QUEUED_BEHIND,
        reasons.ReasonKind.WAITS_FOR_QUOTA,
        reasons.ReasonKind.ARRAY_LIMIT,
    }


def test_only_the_head_of_the_queue_waits_for_room_among_queue_kinds() -> None:
    """A run held by the queue fits, except the head (`NextToRun`), which waits for room."""
    fits = {kind for kind in reasons.ReasonKind if kind.fits}
    assert fits == {
        reasons.ReasonKind.QUEUED_BEHIND,
        reasons.ReasonKind.WAITS_FOR_QUOTA,
        reasons.ReasonKind.ARRAY_LIMIT,
    }


def test_every_kind_and_code_is_documented_for_api_users() -> None:
    """docs/api.md lists every `reason_kind` and every rejection `code` the API may send."""
    api = (Path(__file__).parent.parent / "docs" / "api.md").read_text()
    missing = [kind.value for kind in reasons.ReasonKind if f"`{kind.value}`" not in api]
    missing += [code.value for code in reasons.RejectionCode if f"`{code.value}`" not in api]
    assert missing == []
