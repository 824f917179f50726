"""PyTorch's launchers on real agents: `torch.distributed` over `env://` with Gloo, a plain
`torchrun` meeting at the run's own port, and `accelerate launch` with no flags on 2 × 8.
Apart from tests/e2e/test_rendezvous.py (which they shared a cluster with) so that the suite's
two workers can run them side by side: together they take about a minute."""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import WAIT_SECONDS, reserved_ports, until

from .test_rendezvous import EXAMPLES, Rig, four_agents

pytestmark = pytest.mark.slow  # four agents and real PyTorch processes


@pytest.fixture(scope="module")
def held(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Rig, int]]:
    yield from four_agents(tmp_path_factory.mktemp("launchers"))


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason="PyTorch is not installed: the pure-Python barrier tests cover the rendezvous",
)
def test_torch_distributed_gloo_all_reduces(held: tuple[Rig, int]) -> None:
    """`torch.distributed` over `env://` with Gloo, one process per worker and no launcher,
    sums RANK + 1 over two workers and succeeds. (Under `torchrun`: the run's-own-port test
    below, on 2 × 2.)"""
    rig, _ = held
    command = [sys.executable, str(EXAMPLES / "allreduce.py")]
    # Loopback is never a reported interface: Gloo is told to use it.
    argv = ["--gpus", "2", "--machines", "2", "--env", "GLOO_SOCKET_IFNAME=lo"]
    run = rig.run("gloo", *argv, "--", *command)
    logs = rig.astra("astraeus", "logs", "gloo")
    assert run["state"] == "Succeeded", logs
    assert logs.count("sum 3, expected 3") == 2


SUMMED = re.compile(
    r"rank (\d+) of (\d+) \(local rank (\d+)\) at ([0-9.]+):(\d+):"
    r" sum ([0-9.]+), expected ([0-9.]+)"
)
NO_TORCH = importlib.util.find_spec("torch") is None
NO_ACCELERATE = NO_TORCH or importlib.util.find_spec("accelerate") is None


def _summed(rig: Rig, name: str, processes: int) -> list[tuple[int, int, int, str, int]]:
    """Every process's sum line from the run's logs, by rank: each summed right."""

    def lines() -> list[tuple[int, int, int, str, int]] | None:
        found = SUMMED.findall(rig.astra("astraeus", "logs", name))
        assert all(got == want for *_, got, want in found), found
        got = sorted((int(r), int(w), int(lr), a, int(p)) for r, w, lr, a, p, _, _ in found)
        return got if len(got) == processes else None

    return list(until(f"{name}'s {processes} sums", lines))


@pytest.mark.skipif(
    NO_TORCH, reason="PyTorch is not installed: the pure-Python barrier tests cover the rendezvous"
)
def test_torchrun_meets_at_the_runs_own_port(held: tuple[Rig, int]) -> None:
    """A 2 × 2 run with its own MASTER_PORT under a plain `torchrun`: torchrun reads
    PET_MASTER_PORT, which follows the run's MASTER_PORT, so its four processes meet there,
    not at the port Astraeus gave; each worker's log opens with the line that says so."""
    rig, _ = held
    script = str(EXAMPLES / "allreduce.py")
    with reserved_ports(1) as own:  # free to bind with SO_REUSEADDR, as TCPStore does
        argv = ["--gpus", "4", "--machines", "2", "--env", "GLOO_SOCKET_IFNAME=lo"]
        argv += ["--env", f"MASTER_PORT={own}"]
        command = [sys.executable, "-m", "torch.distributed.run", script]
        run = rig.run("torchrun-own-port", *argv, "--", *command, within=2 * WAIT_SECONDS)
        logs = rig.astra("astraeus", "logs", "torchrun-own-port")
        assert run["state"] == "Succeeded", logs
        assert (run["shape"]["tasks"], run["shape"]["gpus_each"]) == (2, 2)
        lines = _summed(rig, "torchrun-own-port", 4)
        assert [(rank, world) for rank, world, *_ in lines] == [(r, 4) for r in range(4)]
        assert {port for *_, port in lines} == {own}
        note = f"PET_MASTER_PORT={own} (follows MASTER_PORT); the run's values are used"
        assert logs.count(note) == 2, logs


@pytest.mark.skipif(NO_ACCELERATE, reason="PyTorch or Accelerate is not installed")
@pytest.mark.parametrize(("gpus_each", "gpus"), [(8, "16")])
def test_accelerate_launch_with_no_flags(held: tuple[Rig, int], gpus_each: int, gpus: str) -> None:
    """`accelerate launch train.py`, no flags, on 2 × 8: each worker starts one process per
    GPU (Gloo standing in for NCCL: the machines' GPUs are fake) and all meet at the port the
    run holds, never Accelerate's 29500. (2 × 2 checked every line of this again with fewer
    processes, for 20 s of the suite; a 2 × 2 launch is torchrun's test above.)"""
    rig, first = held
    name = f"accelerate-{gpus_each}"
    accelerate = str(Path(sys.executable).with_name("accelerate"))
    command = [accelerate, "launch", str(EXAMPLES / "accelerate_sum.py")]
    argv = ["--gpus", gpus, "--machines", "2", "--env", "GLOO_SOCKET_IFNAME=lo"]
    # 16 processes importing PyTorch on a CI machine of 2 cores busy with other tests: a minute
    # or two, never a hang.
    run = rig.run(name, *argv, "--", *command, within=4 * WAIT_SECONDS)
    logs = rig.astra("astraeus", "logs", name)
    assert run["state"] == "Succeeded", logs
    assert (run["shape"]["tasks"], run["shape"]["gpus_each"]) == (2, gpus_each)
    processes = 2 * gpus_each
    lines = _summed(rig, name, processes)
    assert [(rank, world) for rank, world, *_ in lines] == [
        (r, processes) for r in range(processes)
    ]
    assert [local for _, _, local, _, _ in lines] == [r % gpus_each for r in range(processes)]
    ports = {port for *_, port in lines}
    assert len(ports) == 1
    assert first < ports.pop() <= first + 40
