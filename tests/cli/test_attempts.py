"""`astra astraeus status` lists a retried run's attempts (issue 28.5)."""

from __future__ import annotations

from datetime import UTC, datetime

from astraeus.coordinator.cli.render import status_lines
from astraeus.shared import Attempt, RequestedResources, Run, RunState, Task, TaskState

START = datetime(2026, 10, 1, 9, 0, 0, tzinfo=UTC)
FAULTED = datetime(2026, 10, 1, 11, 42, 10, tzinfo=UTC)
FIRST = "finetune-0 Failed (exit 1): exited with code 1; GPU 3 (GPU-3) faulted: Xid 79"


def _run(**fields: object) -> Run:
    task = Task(name="finetune-0", run="finetune", index=0, state=TaskState.PENDING)
    base = Run(
        name="finetune",
        workspace="vision",
        command=["python", "train.py"],
        requested_resources=RequestedResources(),
        state=RunState.PENDING,
        reason="Requeued after a fault (attempt 2 of 4)",
        tasks=[task],
        submitted_at=START,
    )
    return base.model_copy(update=fields)


def test_a_requeued_run_lists_its_attempts() -> None:
    """Attempt 2 of 4: the first with when it started and ended and why, the second waiting."""
    run = _run(
        retries=3,
        attempt=2,
        attempts=[
            Attempt(number=1, started_at=START, ended_at=FAULTED, reason=FIRST),
            Attempt(number=2),
        ],
    )
    assert status_lines(run)[2:] == [
        "Attempt 2 of 4 (retries 3):",
        "  #  started              ended                why it ended",
        f"  1  2026-10-01 09:00:00  2026-10-01 11:42:10  {FIRST}",
        "  2  -                    -",
    ]


def test_a_run_without_retries_shows_no_attempts() -> None:
    """A run placed once without `retries` keeps the two lines it always had."""
    assert len(status_lines(_run(attempts=[Attempt(number=1)]))) == 2
