"""The guide's reason texts, written by one function each."""

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


@pytest.mark.parametrize(
    "text",
    [
        reasons.next_to_run("waiting for 8 GPUs"),
        reasons.queued_behind("pretrain"),
        reasons.waits_for_quota(24, 32, 16),
        reasons.array_at_most(4),
    ],
    ids=["next", "behind", "quota", "array"],
)
def test_queue_reasons_are_recognised(text: str) -> None:
    """Queue reasons start with the guide's words, so the console can tell them from room."""
    assert reasons.is_queue_reason(text)


def test_room_reason_is_not_a_queue_reason() -> None:
    """A filter's reason is not mistaken for a queue reason."""
    assert not reasons.is_queue_reason(reasons.insufficient_gpus(8, 4))
