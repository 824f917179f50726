"""`astra astraeus status` says when a task's machine fell silent (issue 25.3)."""

from __future__ import annotations

from datetime import UTC, datetime

from astraeus.coordinator.cli.render import status_lines
from astraeus.shared import RequestedResources, Run, RunState, Task, TaskState

HEARD = datetime(2026, 10, 1, 9, 0, 0, 123456, tzinfo=UTC)


def _run(silent: datetime | None) -> Run:
    task = Task(
        name="finetune-0",
        run="finetune",
        index=0,
        state=TaskState.RUNNING,
        machine="gpu-01",
        assigned_gpu_ids=[f"GPU-{i}" for i in range(8)],
        machine_silent_since=silent,
    )
    return Run(
        name="finetune",
        workspace="vision",
        command=["python", "train.py"],
        requested_resources=RequestedResources(),
        state=RunState.RUNNING,
        tasks=[task],
        submitted_at=HEARD,
        machine_silent_since=silent,
    )


def test_a_task_on_a_silent_machine_says_since_when() -> None:
    assert status_lines(_run(HEARD).model_dump(mode="json"))[1] == (
        "  finetune-0  Running  gpu-01  8 GPUs, machine silent since 2026-10-01T09:00:00+00:00"
    )
    assert (
        status_lines(_run(None).model_dump(mode="json"))[1]
        == "  finetune-0  Running  gpu-01  8 GPUs"
    )
