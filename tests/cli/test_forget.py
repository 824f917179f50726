"""`astra astraeus machine forget NAME`: asks first, refuses without a terminal unless `--yes`,
and says what it did (issue 25.4); `machine NAME` is unchanged."""

from __future__ import annotations

import io
import json

import pytest

from .conftest import Astra
from .rig import H100, Coordinator, gpu_report

FORGOTTEN = (
    "gpu-01 forgotten: 1 task Lost (vision/train-0), 4 GPUs released, 0 reservations removed,"
    " 1 agent token revoked\n"
)


class Terminal(io.StringIO):
    """What the admin types, on a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def running(coordinator: Coordinator, astra: Astra) -> str:
    """Run `train` (4 GPUs) running on gpu-01."""
    coordinator.report(gpu_report("gpu-01", 8, H100, 80, {"pool": "h100"}))
    token = coordinator.member("vision", ["h100"])
    astra("astraeus", "run", "--name", "train", "--gpus", "4", "--", "python", "t.py", token=token)
    coordinator.run_pass()
    coordinator.report(
        gpu_report("gpu-01", 8, H100, 80, {"pool": "h100"}),
        [{"task": "train-0", "state": "Running"}],
    )
    return token


def _train(astra: Astra, token: str) -> str:
    return astra("astraeus", "status", "train", token=token).out.splitlines()[1]


def test_without_a_terminal_forget_needs_yes(
    astra: Astra, running: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    refused = astra("astraeus", "machine", "forget", "gpu-01")
    assert (refused.code, refused.err) == (
        2,
        "astra: forget asks for confirmation on a terminal: add --yes to forget gpu-01 without"
        " one\n",
    )
    assert "Running" in _train(astra, running)
    done = astra("astraeus", "machine", "forget", "gpu-01", "--yes")
    assert (done.code, done.out) == (0, FORGOTTEN)
    assert _train(astra, running).split()[:3] == ["train-0", "Lost", "gpu-01"]
    gone = astra("astraeus", "machine", "gpu-01")
    assert gone.code == 5


def test_forget_asks_on_a_terminal(
    astra: Astra, running: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No (or anything but y/yes) keeps the machine, exit 1; yes forgets it. The question goes
    to stderr, so `-o json` prints only the answer's JSON."""
    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    kept = astra("astraeus", "machine", "forget", "gpu-01")
    assert kept.code == 1
    assert kept.err.startswith("Forget machine gpu-01 (Up, last seen ")
    assert "(runs: train) and its 4 GPU(s) in use are released" in kept.err
    assert kept.err.endswith("[y/N] astra: gpu-01 not forgotten\n")
    assert "Running" in _train(astra, running)
    monkeypatch.setattr("sys.stdin", Terminal("yes\n"))
    done = astra("astraeus", "machine", "forget", "gpu-01", "-o", "json")
    assert done.code == 0
    assert json.loads(done.out)["tasks_lost"] == ["vision/train-0"]


def test_machine_name_and_its_usage_errors(astra: Astra, running: str) -> None:
    """Forgetting is for admins; `machine NAME` still shows a machine; a second word other
    than `forget`, `forget` alone and `--yes` alone are usage errors."""
    refused = astra("astraeus", "machine", "forget", "gpu-01", "--yes", token=running)
    assert (refused.code, refused.err) == (4, "astra: this needs an admin token\n")
    assert astra("astraeus", "machine", "gpu-01").out.startswith("gpu-01")
    assert astra("astraeus", "machine", "drop", "gpu-01").code == 2
    assert astra("astraeus", "machine", "forget").err == (
        "astra: forget needs the machine: astra astraeus machine forget NAME\n"
    )
    assert astra("astraeus", "machine", "gpu-01", "--yes").code == 2
