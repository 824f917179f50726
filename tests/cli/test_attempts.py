"""`astra astraeus status` lists a retried run's attempts (issue 28.5)."""

from __future__ import annotations

from datetime import UTC, datetime

from astraeus.coordinator.cli.render import status_lines
from astraeus.shared import Attempt, RequestedResources, Run, RunState, Task, TaskState

from .conftest import Astra
from .rig import H100, Coordinator, gpu_report

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
    assert status_lines(run.model_dump(mode="json"))[2:] == [
        "Attempt 2 of 4 (retries 3):",
        "  #  started              ended                why it ended",
        f"  1  2026-10-01 09:00:00  2026-10-01 11:42:10  {FIRST}",
        "  2  -                    -",
    ]


def test_a_preempted_run_says_when_and_for_what_priority() -> None:
    """A run without retries, preempted once: its attempts, and when and for what priority it
    was preempted (a preemption uses up no retry, so no `of N`)."""
    preempted = "Preempted by a higher-priority run (priority 1000)"
    run = _run(
        reason="Preempted by a higher-priority run",
        attempt=2,
        preemptions=1,
        preempted_at=FAULTED,
        preempted_for_priority=1000,
        attempts=[
            Attempt(number=1, started_at=START, ended_at=FAULTED, reason=preempted),
            Attempt(number=2),
        ],
    )
    assert status_lines(run.model_dump(mode="json"))[2:] == [
        "Attempt 2 (retries 0; preempted once, last at 2026-10-01 11:42:10 for a run of"
        " priority 1000):",
        "  #  started              ended                why it ended",
        f"  1  2026-10-01 09:00:00  2026-10-01 11:42:10  {preempted}",
        "  2  -                    -",
    ]


def test_a_run_without_retries_shows_no_attempts() -> None:
    """A run placed once without `retries` keeps the two lines it always had."""
    assert len(status_lines(_run(attempts=[Attempt(number=1)]).model_dump(mode="json"))) == 2


def test_logs_of_an_earlier_attempt(coordinator: Coordinator, astra: Astra) -> None:
    """A run retried on failure: `status` lists both attempts, `logs RUN` prints the attempt
    now, `logs RUN --attempt 1` the first one's; an attempt it never had is a usage error."""
    machine = gpu_report("gpu-01", 8, H100, 80)
    coordinator.report(machine)
    token = coordinator.member("vision")
    flags = ("--name", "train", "--gpus", "1", "--retries", "1", "--retry-on-failure")
    astra("astraeus", "run", *flags, "--", "python", "t.py", token=token)
    coordinator.run_pass()
    first = [{"task": "train-0", "offset": 0, "data": "step 1\nOOM\n"}]
    coordinator.report(machine, [{"task": "train-0", "state": "Running"}], first)
    coordinator.report(machine, [{"task": "train-0", "state": "Failed", "exit_code": 1}])
    coordinator.run_pass()
    second = [{"task": "train-0", "offset": 0, "data": "resumed\n"}]
    coordinator.report(machine, [{"task": "train-0", "state": "Running"}], second)

    status = astra("astraeus", "status", "train", token=token).out.splitlines()
    assert status[2] == "Attempt 2 of 2 (retries 1, on failure too):"
    assert status[4].split()[0] == "1"
    assert status[4].endswith("train-0 Failed (exit 1)")
    assert astra("astraeus", "logs", "train", token=token).out == "resumed\n"
    assert astra("astraeus", "logs", "train", "--attempt", "1", token=token).out == "step 1\nOOM\n"
    wrong = astra("astraeus", "logs", "train", "--attempt", "3", token=token)
    assert wrong.code == 2
    assert wrong.err == "astra: --attempt: run train has attempts 1, 2, not 3\n"


def test_a_dry_run_that_would_preempt_says_its_cost() -> None:
    """`run --dry-run` of a run that would start only by preempting prints what it would stop."""
    from astraeus.coordinator.cli.submit import dry_run_lines
    from astraeus.shared import RunSpec
    from astraeus.shared.reasons import ReasonKind
    from astraeus.shared.views import DryRun

    spec = RunSpec(name="urgent", command=["python", "train.py"], priority=1000)
    reason = "would start after preempting 2 runs, 16 GPUs"
    dry = DryRun(would_start=False, reason=reason, reason_kind=ReasonKind.PREEMPTING)
    assert dry_run_lines(spec.name, dry.model_dump(mode="json")) == [f"urgent {reason}"]
