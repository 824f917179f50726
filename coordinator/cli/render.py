"""Text for people: the guide's status lines, the pending explanation, lists.

Each function reads the API's answer as `json.loads` gives it (plain dicts, `Answer`), the fields
named as the shared models name them (`shared/run.py`, `shared/explanation.py`): the commands
people type all day print without building a model (pydantic and the models cost more than the
rest of `astra status` together). A field missing or of another type is a `KeyError` or
`TypeError`, which `dispatch` says as an answer it did not understand."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing`, `datetime` and the reasons' enums: loaded only where they serve
    from collections.abc import Sequence
    from datetime import datetime
    from typing import Any

    from astraeus.shared.reasons import ReasonKind

    Answer = dict[str, Any]
else:
    Answer = dict
"""An object of the API's answer, parsed with `json.loads`."""

NO_CONTAINER = "NoContainerRuntime"
"""`RejectionCode.NO_CONTAINER_RUNTIME`, the code of the capabilities filter's reason for a
machine without podman or docker (a test keeps the two the same)."""

ENDED_RUN_STATES = frozenset({"Succeeded", "Failed", "Cancelled"})
"""`RunState.ended`'s states (`shared/run.py`; a test keeps the two the same)."""
ENDED_TASK_STATES = frozenset({"Succeeded", "Failed", "Cancelled", "Lost"})
"""`TaskState.ended`'s states (`shared/run.py`; a test keeps the two the same)."""


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


def reason_kind(value: str | None) -> ReasonKind | None:
    """The answer's `reason_kind` as the enum whose rules (`fits`) the texts follow; the enum
    is loaded only for a run that waits (a running one has none)."""
    if value is None:
        return None
    from astraeus.shared.reasons import ReasonKind

    return ReasonKind(value)


def when(text: str | None) -> datetime | None:
    """A time of the answer (ISO 8601, as the models write it), or None."""
    if text is None:
        return None
    from datetime import datetime  # only for an answer with a time to show

    return datetime.fromisoformat(text)


def run_headline(run: Answer) -> str:
    """`finetune: Pending — No machine fits: 3 of 3 machines ready`."""
    detail = run["reason"]
    if detail is None and run["state"] == "Running" and run["shape"] is not None:
        detail = run["shape"]["why"]
    return f"{run['name']}: {run['state']}" + (f" — {detail}" if detail else "")


def task_detail(task: Answer) -> str:
    """The last column of a task's line: why it waits, or how it ended."""
    state = task["state"]
    if state == "Pending":
        return str(task["reason"] or "")
    if state in ENDED_TASK_STATES:
        code = task["exit_code"]
        parts = [f"exit {code}"] if code is not None else []
        parts += [text for text in (task["message"], task["reason"]) if text]
        return ", ".join(parts)
    gpus = len(task["assigned_gpu_ids"])
    parts = [f"{gpus} GPU{'s' if gpus != 1 else ''}"] if gpus else []
    silent = when(task["machine_silent_since"])
    if silent is not None:
        # Silence is not death: the worker may still run, and the task is not Lost yet.
        parts.append(f"machine silent since {silent.isoformat(timespec='seconds')}")
    return ", ".join(parts)


def task_lines(run: Answer) -> list[str]:
    """`  finetune-0  Pending  -  No machine fits: 3 of 3 machines ready`, one per task."""
    rows = [
        [task["name"], task["state"], task["machine"] or "-", task_detail(task)]
        for task in run["tasks"]
    ]
    return table(rows, indent="  ")


def status_lines(run: Answer) -> list[str]:
    return [run_headline(run), *task_lines(run), *attempt_lines(run)]


def attempt_lines(run: Answer) -> list[str]:
    """A run that may be retried, or was (after a fault or a preemption): its attempts, when
    each started and ended, and why an attempt that ended did. Nothing for a run without
    `retries` placed once."""
    retries, attempt, preemptions = run["retries"], run["attempt"], run["preemptions"]
    if retries == 0 and attempt == 1 and preemptions == 0:
        return []
    said = f"retries {retries}" + (", on failure too" if run["retry_on_failure"] else "")
    rows = [
        [
            str(each["number"]),
            _when(each["started_at"]),
            _when(each["ended_at"]),
            each["reason"] or "",
        ]
        for each in run["attempts"]
    ]
    head = f"Attempt {attempt} of {retries + 1} ({said}):"
    if preemptions:  # preemptions use up no retry: attempts are no longer bounded by them
        times = "once" if preemptions == 1 else f"{preemptions} times"
        head = (
            f"Attempt {attempt} ({said}; preempted {times}, last at"
            f" {_when(run['preempted_at'])} for a run of priority"
            f" {run['preempted_for_priority']}):"
        )
    return [head, *table([["#", "started", "ended", "why it ended"], *rows], indent="  ")]


def _when(text: str | None) -> str:
    at = when(text)
    return at.strftime("%Y-%m-%d %H:%M:%S") if at is not None else "-"


def placement_of(run: Answer) -> Answer | None:
    """The explanation of the run's first waiting task."""
    task = explained_task(run)
    found: Answer | None = task["placement"] if task is not None else None
    return found


def explained_task(run: Answer) -> Answer | None:
    """The run's first waiting task with an explanation (full or grouped)."""
    task: Answer
    for task in run["tasks"]:
        explained = task["placement"] is not None or task["placement_grouped"] is not None
        if explained and task["state"] == "Pending":
            return task
    return None


def why_lines(
    explanation: Answer,
    kind: ReasonKind | None = None,
    rejections: Sequence[Answer] | None = None,
) -> list[str]:
    """Every machine and what keeps it out: the closest first, then machines up, then down.
    Under a queue reason (`kind`) the run fits, and the queue holds it back: so it says. The
    `rejections` (the data behind the texts) add a hint where a reason needs more words."""
    closest = explanation["closest"]
    head = why_head(explanation, kind)
    nodes = sorted(
        explanation["nodes"],
        key=lambda node: (node["name"] != closest, node["state"] != "Up", node["name"]),
    )
    rows = [[node["name"], node["state"], "; ".join(node["reasons"])] for node in nodes]
    return [head, *table(rows, indent="  "), *hint_lines(rejections or ())]


def why_head(explanation: Answer, kind: ReasonKind | None) -> str:
    """The first line of `--why`, from a full or a grouped explanation."""
    head = (
        f"Why it is not running yet: {plural(explanation['checked_nodes'], 'machine')} checked, "
        f"{explanation['ready_nodes']} ready, {explanation['down_nodes']} down"
    )
    if kind is not None and kind.fits:
        return head + "; the run fits, and the queue holds it back"
    closest = explanation["closest"]
    return head + (
        f"; closest: {closest}" if closest else "; no machine could ever take it as asked"
    )


def grouped_why_lines(explanation: Answer, kind: ReasonKind | None = None) -> list[str]:
    """`why_lines` from the grouped explanation: each machine of a reason named when all are
    (so a small cluster prints exactly what `why_lines` prints), else the first few and how many
    more; the closest first, then machines up, then down."""
    closest = explanation["closest"]
    rows: list[tuple[tuple[bool, bool, str], list[str]]] = []
    for group in explanation["reasons"]:
        state, machines, count = group["state"], group["machines"], group["count"]
        if count == len(machines):
            for name in machines:
                key = (name != closest, state != "Up", name)
                rows.append((key, [name, state, group["reason"]]))
            continue
        first = machines[0] if machines else ""
        names = f"{', '.join(machines)} and {count - len(machines)} more"
        rows.append(((first != closest, state != "Up", first), [names, state, group["reason"]]))
    rows.sort(key=lambda row: row[0])
    codes = (group["code"] for group in explanation["reasons"])
    hints = CONTAINER_HINT if any(code == NO_CONTAINER for code in codes) else []
    return [why_head(explanation, kind), *table([r for _k, r in rows], indent="  "), *hints]


CONTAINER_HINT = [
    "Runs with --image need a container runtime: an agent reports the capability `container`",
    "when podman or docker is on its PATH (install one on the GPU machines, e.g. `apt-get",
    "install podman`, and restart the agent). The demo's machines have none: leave out --image",
    "to run the command directly on them.",
]


def hint_lines(rejections: Sequence[Answer]) -> list[str]:
    """A sentence for a reason that needs more than its words: today, no container runtime."""
    if any(group["code"] == NO_CONTAINER for group in rejections):
        return CONTAINER_HINT
    return []


def gpu_count(run: Answer) -> int:
    """`RequestedResources.gpu_count`: the GPUs the whole run asks for."""
    gpus = run["requested_resources"].get("gpu_requests")
    return int(gpus["count"]) if gpus else 0


def run_rows(runs: Sequence[Answer]) -> list[str]:
    rows = [["NAME", "STATE", "GPUS", "TASKS", "REASON"]]
    for run in runs:
        running = sum(task["state"] == "Running" for task in run["tasks"])
        shape = run["shape"]
        rows.append(
            [
                run["name"],
                run["state"],
                str(gpu_count(run)),
                f"{running}/{len(run['tasks'])}",
                run["reason"] or (shape["why"] if shape else ""),
            ]
        )
    return table(rows)
