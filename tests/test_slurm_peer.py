"""The Slurm comparison helper (`benchmarks/slurm_peer.py`) reads `sbatch --test-only`'s
answers as Slurm prints them, and writes a controller configuration with CLOUD nodes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "slurm_peer.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("slurm_peer", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["slurm_peer"] = module
    spec.loader.exec_module(module)
    return module


peer = _load()


def test_a_will_run_answer_is_read() -> None:
    """Slurm 22.05's line (src/sbatch/sbatch.c) gives when, how many processors, which nodes
    and which partition."""
    text = (
        "sbatch: Job 4 to start at 2026-12-03T10:00:00 using 1 processors on nodes n00017"
        " in partition gpu\n"
    )
    assert peer.parse_test_only(text) == peer.WillRun(
        start="2026-12-03T10:00:00", nodes="n00017", processors=1, partition="gpu"
    )


def test_an_answer_from_before_partitions_is_read() -> None:
    """A controller from 17.11 or earlier leaves out the partition."""
    text = "sbatch: Job 12 to start at 2017-06-01T08:30:00 using 16 processors on nodes n[01-02]"
    assert peer.parse_test_only(text) == peer.WillRun(
        start="2017-06-01T08:30:00", nodes="n[01-02]", processors=16, partition=None
    )


def test_a_refusal_is_read_as_an_error() -> None:
    """A job no node can take is Slurm's error line, kept as it is."""
    text = (
        "sbatch: error: Job submit/allocate failed: Requested node configuration is not available\n"
    )
    assert peer.parse_test_only(text) == peer.WillRun(
        error="Job submit/allocate failed: Requested node configuration is not available"
    )


def test_a_refusal_of_the_test_only_question_is_read_as_an_error() -> None:
    """What Debian's Slurm 22.05 printed here for `sbatch --test-only -N1 --gres=gpu:9` on
    machines of 8 GPUs is a refusal, kept as it is."""
    text = "allocation failure: Requested node configuration is not available\n"
    assert peer.parse_test_only(text) == peer.WillRun(
        error="Requested node configuration is not available"
    )


def test_anything_else_is_refused() -> None:
    """Output that is neither answer is an error naming what was seen, never a figure."""
    with pytest.raises(ValueError, match="not an answer of sbatch --test-only: 'Submitted"):
        peer.parse_test_only("Submitted batch job 5\n")


def test_the_controller_has_cloud_nodes_on_loopback(tmp_path: Path) -> None:
    """The configuration lists N CLOUD nodes with 8 GPUs each, one partition, the controller on
    127.0.0.1 and MUNGE on the private socket."""
    conf = peer.slurm_conf(tmp_path, 5000, 16817, "bench", tmp_path / "munge.socket")
    lines = conf.splitlines()
    assert "SlurmctldHost=localhost(127.0.0.1)" in lines
    assert "NodeName=n[00001-05000] State=CLOUD CPUs=128 RealMemory=2000000 Gres=gpu:8" in lines
    assert "PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP" in lines
    assert f"AuthInfo=socket={tmp_path / 'munge.socket'}" in lines
    assert "SlurmctldPort=16817" in lines
