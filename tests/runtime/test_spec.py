"""What the shim is told: the agent re-checks the user's variables whatever the coordinator let
through, and a plain worker gets its own HOME and TMPDIR, not the agent's."""

from pathlib import Path

import pytest
from runtime_rig import AGENT_ENV, assignment, machine_report

from astraeus.agent.environment import worker_environment
from astraeus.agent.runtime.runner import note_users_own
from astraeus.agent.runtime.spec import CannotStartError, Files, shim_spec
from astraeus.agent.runtime.workdir import Worker

FILES = Files(
    spec=Path("/state/tasks/t-0/spec.json"),
    log=Path("/state/tasks/t-0/output.log"),
    started=Path("/state/tasks/t-0/started.json"),
    status=Path("/state/tasks/t-0/status.json"),
)
WHERE = Worker(workdir=Path("/state-work/t-0"), user=None)


def _spec(**extra: object) -> dict:
    task = assignment("t-0", ["train"], **extra)
    worker = worker_environment(task, machine_report())
    return shim_spec(task, worker, FILES, WHERE, agent_env=AGENT_ENV, runtime="/usr/bin/podman")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        pytest.param({"env": {"A=B": "x"}}, "env: 'A=B' is not a variable name", id="name"),
        pytest.param({"env": {"K": "a\0b"}}, "env.K: a value may not hold a NUL byte", id="nul"),
        pytest.param(
            {"env": {"K": "a\nB=c"}, "image": "alpine"},
            "env.K: a container's variable may not hold a line break (podman and docker read "
            "them one per line)",
            id="line-break-in-a-container",
        ),
    ],
)
def test_variables_a_worker_cannot_be_given(extra: dict, message: str) -> None:
    """A bad name, a NUL, or a line break bound for a container's file fails the task."""
    with pytest.raises(CannotStartError) as caught:
        _spec(**extra)
    assert str(caught.value) == message


def test_a_plain_worker_may_have_a_line_break() -> None:
    """Outside a container a value may span lines (a PEM key): execve takes it as it is."""
    assert _spec(env={"KEY": "-----BEGIN\nx\n-----END"})["env"]["KEY"] == "-----BEGIN\nx\n-----END"


def test_a_plain_worker_lives_in_its_working_directory() -> None:
    """cwd, HOME and TMPDIR are the task's own; the agent's USER and HOME never reach it; a
    user's own HOME wins over the default."""
    spec = _spec()
    assert (spec["cwd"], spec["env"]["HOME"], spec["env"]["TMPDIR"]) == (
        "/state-work/t-0", "/state-work/t-0", "/state-work/t-0/tmp"
    )  # fmt: skip
    assert _spec(env={"HOME": "/data/me"})["env"]["HOME"] == "/data/me"


def test_the_users_own_rendezvous_variables_win() -> None:
    """A run's own MASTER_PORT (or any rendezvous variable) wins over the placement's, and
    reaches PET_MASTER_PORT, which torchrun reads; the rest of the placement's variables stay."""
    env = _spec(env={"MASTER_PORT": "29999", "PET_NPROC_PER_NODE": "2"}, image=None)["env"]
    assert (env["MASTER_PORT"], env["PET_NPROC_PER_NODE"]) == ("29999", "2")
    assert (env["PET_MASTER_PORT"], env["WORLD_SIZE"]) == ("29999", "2")


def test_the_users_variables_never_replace_the_gpus() -> None:
    """A run's own CUDA_VISIBLE_DEVICES does not win: the placement keeps workers on their GPUs."""
    assert (
        _spec(env={"CUDA_VISIBLE_DEVICES": "0,1"}, image=None)["env"]["CUDA_VISIBLE_DEVICES"] == ""
    )


def test_the_task_log_says_which_rendezvous_variables_the_run_set(tmp_path: Path) -> None:
    """The note at the top of the task's log names each variable the run set and what Astraeus
    gave; none is written when the run sets none."""
    log = tmp_path / "output.log"
    placed = {"MASTER_PORT": "29500", "MASTER_ADDR": "10.0.0.1"}
    note_users_own(log, {"PATH": "/bin"}, placed)
    assert not log.exists()
    note_users_own(log, {"MASTER_PORT": "29999", "PET_NNODES": "2"}, placed)
    assert log.read_text() == (
        "astraeus: the run's env sets MASTER_PORT=29999 (Astraeus gave 29500), PET_NNODES=2"
        " (Astraeus sets none), PET_MASTER_PORT=29999 (follows MASTER_PORT); the run's values"
        " are used\n"
    )
