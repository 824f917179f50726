"""Issue 30's CLI stumbles: a run that can never fit warned of at once, an ended run's name used
again or the run deleted, flags before the command, hints and words a user can act on, an empty
cluster explained, and `astra … | head` without a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from astraeus.coordinator.cli.errors import refusal
from astraeus.coordinator.demo.worker import shown

from .conftest import Astra
from .rig import H100, Coordinator, gpu_report

ASTRA = Path(sys.executable).parent / "astra"


def _two_machines(coordinator: Coordinator) -> str:
    """gpu-01 and gpu-02, 8 H100s each (16 GPUs); a member token of `vision`."""
    token = coordinator.member("vision")
    for name in ("gpu-01", "gpu-02"):
        coordinator.report(gpu_report(name, 8, H100, 80))
    return token


def test_a_run_that_can_never_fit_is_accepted_with_a_warning(
    coordinator: Coordinator, astra: Astra
) -> None:
    """128 GPUs on 16: submitted (exit 0, it waits as the guide says) and warned of at once,
    in one sentence on stderr with the coordinator's reason."""
    token = _two_machines(coordinator)
    result = astra("astraeus", "run", "--name", "big", "--gpus", "128", "--", "true", token=token)
    assert result.code == 0, result.err
    assert result.out.startswith("big submitted to ")
    assert result.err == (
        "astra: warning: no machines of workspace vision could ever hold big as asked (the"
        " workspace's machines have 16 GPUs that match; the run asks for 128); it waits until"
        " the run or the machines change: astra astraeus status big --why\n"
    )
    assert astra("astraeus", "status", "big", token=token).out.startswith("big: Pending")


def test_one_lasting_reason_on_every_machine_is_warned_of_and_room_is_not(
    coordinator: Coordinator, astra: Astra
) -> None:
    token = _two_machines(coordinator)
    label = ["--label", "fabric=ib-9"]
    result = astra("run", "--name", "nowhere", *label, "--gpus", "1", "--", "true", token=token)
    assert result.code == 0
    assert result.err.startswith("astra: warning: no machines of workspace vision could ever")
    # Room, not a lasting reason: every GPU held by `first`, the next run waits without a word.
    assert astra("run", "--name", "first", "--gpus", "16", "--", "true", token=token).err == ""
    coordinator.run_pass()
    result = astra("run", "--name", "second", "--gpus", "8", "--", "true", token=token)
    assert (result.code, result.err) == (0, "")


def test_an_ended_runs_name_is_used_again_and_delete_removes_one(
    coordinator: Coordinator, astra: Astra
) -> None:
    token = _two_machines(coordinator)
    assert astra("run", "--name", "a", "--gpus", "1", "--", "true", token=token).code == 0
    refused = astra("run", "--name", "a", "--gpus", "1", "--", "true", token=token)
    assert refused.code == 1
    assert "cancel that run first" in refused.err
    deleting = astra("delete", "a", token=token)
    assert deleting.code == 1
    assert deleting.err == (
        "astra: run 'a' is Pending: only a run that has ended can be deleted\n"
        "  name: has not ended; cancel that run first, then delete it\n"
    )
    assert astra("cancel", "a", token=token).code == 0
    again = astra("run", "--name", "a", "--gpus", "1", "--", "true", token=token)
    assert (again.code, again.err) == (0, "")
    assert astra("cancel", "a", token=token).code == 0
    assert (
        astra("delete", "a", token=token).out
        == "a deleted (Cancelled): the name may be used again\n"
    )
    assert astra("status", "a", token=token).code == 5
    assert astra("list", token=token).out.count("\n") <= 1


@pytest.mark.parametrize(
    "argv",
    [
        ["-o", "json", "status", "x"],
        ["--output=json", "astraeus", "status", "x"],
        ["--workspace", "vision", "-o", "json", "status", "x"],
        ["status", "x", "-o", "json"],
    ],
)
def test_common_flags_go_before_the_command_or_after_it(
    coordinator: Coordinator, astra: Astra, argv: list[str]
) -> None:
    token = coordinator.member("vision")
    assert astra("run", "--name", "x", "--", "true", token=token).code == 0
    result = astra(*argv, token=token)
    assert result.code == 0, result.err
    assert result.out.startswith('{\n  "name": "x",')


def test_an_unknown_flag_names_the_commands_help(astra: Astra) -> None:
    result = astra("status", "x", "--bogus")
    assert (result.code, result.err) == (
        2,
        "astra: unrecognized arguments: --bogus\n"
        "Run 'astra astraeus status --help' to see what it takes.\n",
    )
    result = astra("astraeus", "workspace", "set", "w", "--gpu-quta", "3")
    assert result.err.endswith("Run 'astra astraeus workspace set --help' to see what it takes.\n")


def test_a_bad_name_from_the_coordinator_is_said_in_words() -> None:
    """The coordinator names the pattern (for programs); astra says it as the console does."""
    said = refusal(
        "invalid RunSpec",
        [("name", "'Bad_Name' does not match ^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")],
    )
    assert said == (
        "invalid RunSpec\n  name: 'Bad_Name' is not allowed: use lowercase letters, digits and"
        " '-', up to 63 characters, starting and ending with a letter or digit"
    )


def test_an_admin_without_a_workspace_is_told_the_flag(astra: Astra) -> None:
    result = astra("list")
    assert (result.code, result.err) == (
        2,
        "astra: an admin must name the workspace\n  workspace: is required for an admin's"
        " token: pass --workspace NAME or set ASTRA_WORKSPACE\n",
    )


def test_machines_of_an_empty_cluster_say_how_one_joins(astra: Astra) -> None:
    result = astra("machines")
    assert result.code == 0
    assert result.out.startswith("no machines yet (none you may use): a machine joins when")
    assert "astra astraeus token create --role agent --machine NAME" in result.out


def test_output_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    """`astra --help | head -0`: the reader is gone before astra writes; no traceback."""
    read, write = os.pipe()
    os.close(read)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ASTRA_")}
    try:
        done = subprocess.run(
            [ASTRA, "astraeus", "--help"],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            env=clean,
        )
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (0, "")


def test_the_demos_exact_match_prefix_is_explained() -> None:
    assert shown("NCCL_IB_HCA", "=mlx5_0:1") == (
        "NCCL_IB_HCA==mlx5_0:1 (the '=' before the devices is NCCL's: exactly these names,"
        " not all they begin)"
    )
    assert shown("NCCL_IB_HCA", "mlx5_0:1") == "NCCL_IB_HCA=mlx5_0:1"
