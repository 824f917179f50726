"""What the shim is told: the agent re-checks the user's variables whatever the coordinator let
through, and a plain worker gets its own HOME and TMPDIR, not the agent's."""

from pathlib import Path

import pytest
from runtime_rig import AGENT_ENV, assignment, machine_report

from astraeus.agent.environment import worker_environment
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
