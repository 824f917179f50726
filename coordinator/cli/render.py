"""Text for people: the guide's status lines, the pending explanation, lists."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from astraeus.shared import PendingExplanation, Run, RunState, Task, TaskState
from astraeus.shared.explanation import GroupedExplanation, RejectionGroup
from astraeus.shared.reasons import ReasonKind, RejectionCode

NO_CONTAINER = RejectionCode.NO_CONTAINER_RUNTIME
"""The code of the capabilities filter's reason for a machine without podman or docker."""


def plural(count: int, noun: str) -> str:
    """`1 machine`, `3 machines`."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def table(rows: Sequence[Sequence[str]], indent: str = "") -> list[str]:
    """Columns two spaces apart, each as wide as its widest cell; no trailing spaces."""
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=True)]
        lines.append((indent + "  ".join(cells)).rstrip())
    return lines


def run_headline(run: Run) -> str:
    """`finetune: Pending — No machine fits: 3 of 3 machines ready`."""
    detail = run.reason
    if detail is None and run.state == RunState.RUNNING and run.shape is not None:
        detail = run.shape.why
    return f"{run.name}: {run.state.value}" + (f" — {detail}" if detail else "")


def task_detail(task: Task) -> str:
    """The last column of a task's line: why it waits, or how it ended."""
    if task.state == TaskState.PENDING:
        return task.reason or ""
    if task.state.ended:
        parts = [f"exit {task.exit_code}"] if task.exit_code is not None else []
        parts += [text for text in (task.message, task.reason) if text]
        return ", ".join(parts)
    gpus = len(task.assigned_gpu_ids)
    parts = [f"{gpus} GPU{'s' if gpus != 1 else ''}"] if gpus else []
    if task.machine_silent_since is not None:
        # Silence is not death: the worker may still run, and the task is not Lost yet.
        heard = task.machine_silent_since.isoformat(timespec="seconds")
        parts.append(f"machine silent since {heard}")
    return ", ".join(parts)


def task_lines(run: Run) -> list[str]:
    """`  finetune-0  Pending  -  No machine fits: 3 of 3 machines ready`, one per task."""
    rows = [
        [task.name, task.state.value, task.machine or "-", task_detail(task)] for task in run.tasks
    ]
    return table(rows, indent="  ")


def status_lines(run: Run) -> list[str]:
    return [run_headline(run), *task_lines(run), *attempt_lines(run)]


def attempt_lines(run: Run) -> list[str]:
    """A run that may be retried, or was (after a fault or a preemption): its attempts, when
    each started and ended, and why an attempt that ended did. Nothing for a run without
    `retries` placed once."""
    if run.retries == 0 and run.attempt == 1 and run.preemptions == 0:
        return []
    retries = f"retries {run.retries}" + (", on failure too" if run.retry_on_failure else "")
    rows = [
        [
            str(attempt.number),
            _when(attempt.started_at),
            _when(attempt.ended_at),
            attempt.reason or "",
        ]
        for attempt in run.attempts
    ]
    head = f"Attempt {run.attempt} of {run.retries + 1} ({retries}):"
    if run.preemptions:  # preemptions use up no retry: attempts are no longer bounded by them
        times = "once" if run.preemptions == 1 else f"{run.preemptions} times"
        head = (
            f"Attempt {run.attempt} ({retries}; preempted {times}, last at"
            f" {_when(run.preempted_at)} for a run of priority {run.preempted_for_priority}):"
        )
    return [head, *table([["#", "started", "ended", "why it ended"], *rows], indent="  ")]


def _when(at: datetime | None) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S") if at is not None else "-"


def placement_of(run: Run) -> PendingExplanation | None:
    """The explanation of the run's first waiting task."""
    task = explained_task(run)
    return task.placement if task is not None else None


def explained_task(run: Run) -> Task | None:
    """The run's first waiting task with an explanation (full or grouped)."""
    for task in run.tasks:
        explained = task.placement is not None or task.placement_grouped is not None
        if explained and task.state == TaskState.PENDING:
            return task
    return None


def why_lines(
    explanation: PendingExplanation,
    kind: ReasonKind | None = None,
    rejections: Sequence[RejectionGroup] | None = None,
) -> list[str]:
    """Every machine and what keeps it out: the closest first, then machines up, then down.
    Under a queue reason (`kind`) the run fits, and the queue holds it back: so it says. The
    `rejections` (the data behind the texts) add a hint where a reason needs more words."""
    closest = explanation.closest
    head = why_head(explanation, kind)
    nodes = sorted(
        explanation.nodes,
        key=lambda node: (node.name != closest, node.state.value != "Up", node.name),
    )
    rows = [[node.name, node.state.value, "; ".join(node.reasons)] for node in nodes]
    return [head, *table(rows, indent="  "), *hint_lines(rejections or ())]


def why_head(explanation: PendingExplanation | GroupedExplanation, kind: ReasonKind | None) -> str:
    head = (
        f"Why it is not running yet: {plural(explanation.checked_nodes, 'machine')} checked, "
        f"{explanation.ready_nodes} ready, {explanation.down_nodes} down"
    )
    if kind is not None and kind.fits:
        return head + "; the run fits, and the queue holds it back"
    closest = explanation.closest
    return head + (
        f"; closest: {closest}" if closest else "; no machine could ever take it as asked"
    )


def grouped_why_lines(explanation: GroupedExplanation, kind: ReasonKind | None = None) -> list[str]:
    """`why_lines` from the grouped explanation: each machine of a reason named when all are
    (so a small cluster prints exactly what `why_lines` prints), else the first few and how many
    more; the closest first, then machines up, then down."""
    closest = explanation.closest
    rows: list[tuple[tuple[bool, bool, str], list[str]]] = []
    for group in explanation.reasons:
        state = group.state.value
        if group.count == len(group.machines):
            for name in group.machines:
                rows.append(((name != closest, state != "Up", name), [name, state, group.reason]))
            continue
        first = group.machines[0] if group.machines else ""
        names = f"{', '.join(group.machines)} and {group.count - len(group.machines)} more"
        rows.append(((first != closest, state != "Up", first), [names, state, group.reason]))
    rows.sort(key=lambda row: row[0])
    hints = CONTAINER_HINT if any(g.code == NO_CONTAINER for g in explanation.reasons) else []
    return [why_head(explanation, kind), *table([r for _k, r in rows], indent="  "), *hints]


CONTAINER_HINT = [
    "Runs with --image need a container runtime: an agent reports the capability `container`",
    "when podman or docker is on its PATH (install one on the GPU machines, e.g. `apt-get",
    "install podman`, and restart the agent). The demo's machines have none: leave out --image",
    "to run the command directly on them.",
]


def hint_lines(rejections: Sequence[RejectionGroup]) -> list[str]:
    """A sentence for a reason that needs more than its words: today, no container runtime."""
    if any(group.code == NO_CONTAINER for group in rejections):
        return CONTAINER_HINT
    return []


def run_rows(runs: Sequence[Run]) -> list[str]:
    rows = [["NAME", "STATE", "GPUS", "TASKS", "REASON"]]
    for run in runs:
        running = sum(t.state == TaskState.RUNNING for t in run.tasks)
        rows.append(
            [
                run.name,
                run.state.value,
                str(run.requested_resources.gpu_count),
                f"{running}/{len(run.tasks)}",
                run.reason or (run.shape.why if run.shape else ""),
            ]
        )
    return table(rows)
