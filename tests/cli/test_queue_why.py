"""Explanations that never mislead: a run the queue holds back says it fits, on a real
coordinator (real engine, real SQLite) through `astra astraeus status --why`."""

from __future__ import annotations

from .conftest import Astra
from .rig import H100, Coordinator, gpu_report

HOLD = ["astraeus", "run", "--name"]


def _cluster(coordinator: Coordinator, astra: Astra) -> str:
    """Two 8-GPU machines; `filler` holds 4 GPUs of gpu-01; `big` (16 GPUs) waits for them."""
    for name in ("gpu-01", "gpu-02"):
        coordinator.report(gpu_report(name, 8, H100, 80))
    token = coordinator.member("vision")
    astra(*HOLD, "filler", "--gpus", "4", "--names", "gpu-01", "--", "sleep", "60", token=token)
    coordinator.run_pass()
    astra(*HOLD, "big", "--gpus", "16", "--", "sleep", "60", token=token)
    return token


def test_a_run_held_back_by_the_queue_says_it_fits(coordinator: Coordinator, astra: Astra) -> None:
    """A 4-GPU run that would fit on the machines held for `big` is `Queued behind big`, and
    `--why` says the run fits and the queue holds it back, never that no machine could take it."""
    token = _cluster(coordinator, astra)
    astra(*HOLD, "small", "--gpus", "4", "--", "sleep", "60", token=token)
    coordinator.run_pass()
    result = astra("astraeus", "status", "small", "--why", token=token)
    assert result.out.splitlines() == [
        "small: Pending — Queued behind big",
        "  small-0  Pending  -  Queued behind big",
        "Why it is not running yet: 2 machines checked, 2 ready, 0 down; "
        "the run fits, and the queue holds it back",
        "  gpu-01  Up  held for a run ahead in the queue",
        "  gpu-02  Up  held for a run ahead in the queue",
    ]


def test_a_run_waiting_for_room_behind_the_head_has_a_closest_machine(
    coordinator: Coordinator, astra: Astra
) -> None:
    """A run that fits the idle cluster but not now, whose only machines are held for the head,
    waits for room: each held machine says what else keeps it out (other runs hold its GPUs:
    room), so one is the closest, and nothing says that no machine could ever take it."""
    for name in ("gpu-01", "gpu-02"):
        coordinator.report(gpu_report(name, 8, H100, 80))
    token = coordinator.member("vision")
    for name in ("gpu-01", "gpu-02"):
        hold = [f"hold-{name}", "--gpus", "4", "--names", name, "--", "sleep", "60"]
        astra(*HOLD, *hold, token=token)
    coordinator.run_pass()
    astra(*HOLD, "big", "--gpus", "16", "--", "sleep", "60", token=token)
    whole = ["whole", "--gpus", "8", "--gpus-per-machine", "8", "--", "true"]
    astra(*HOLD, *whole, token=token)
    coordinator.run_pass()
    result = astra("astraeus", "status", "whole", "--why", token=token)
    assert result.out.splitlines() == [
        "whole: Pending — No machine fits: 2 of 2 machines ready",
        "  whole-0  Pending  -  No machine fits: 2 of 2 machines ready",
        "Why it is not running yet: 2 machines checked, 2 ready, 0 down; closest: gpu-01",
        "  gpu-01  Up  insufficient gpus: need 8, 4 free and usable",
        "  gpu-02  Up  insufficient gpus: need 8, 4 free and usable",
    ]
