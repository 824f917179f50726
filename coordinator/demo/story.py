"""What the demo shows, chapter by chapter, through the same API and text as `astra`."""

from __future__ import annotations

import shlex
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from astraeus.coordinator.cli.client import Api
from astraeus.coordinator.cli.machines_view import machine_rows, signals_of
from astraeus.coordinator.cli.parser import build
from astraeus.coordinator.cli.render import (
    explained_task,
    placement_of,
    plural,
    reason_kind,
    status_lines,
    why_lines,
)
from astraeus.coordinator.cli.spec import build_spec
from astraeus.coordinator.cli.submit import submitted_line
from astraeus.shared import Run, RunState, TaskState
from astraeus.shared.machines import MachineDetail, MachineList, MachineView
from astraeus.shared.views import LogView

WORKER = "astraeus.coordinator.demo.worker"
WAIT_SECONDS = 90.0
"""How long a chapter waits for what it expects before saying so and moving on."""
POLL_SECONDS = 0.25
PRETRAIN = 15.0
"""Seconds pretrain's workers work: long enough for the chapters before it ends."""


def worker_command(seconds: float) -> list[str]:
    """The demo worker, run by this interpreter (in a release build: this program, which takes
    `-m MODULE` too)."""
    return [sys.executable, "-m", WORKER, f"{seconds:g}"]


class StoryStoppedError(Exception):
    """The demo is stopping: the story ends where it is."""


@dataclass
class Story:
    """Talks to the coordinator as a user (`member`) and an admin, and prints as it goes."""

    member: Api
    admin: Api
    machines: int
    out: TextIO = field(default_factory=lambda: sys.stdout)
    started: float = field(default_factory=time.monotonic)
    stopping: threading.Event = field(default_factory=threading.Event)

    def say(self, text: str) -> None:
        print(f"[{time.monotonic() - self.started:5.1f}s] {text}", file=self.out, flush=True)

    def lines(self, lines: list[str]) -> None:
        for line in lines:
            print(f"    {line}", file=self.out)
        self.out.flush()

    def chapter(self, title: str) -> None:
        print(f"\n== {title}", file=self.out, flush=True)

    def submit(self, flags: list[str], seconds: float) -> str:
        """Submit as `astra astraeus run FLAGS -- PYTHON -m WORKER SECONDS` would, and echo that
        command exactly, so it runs as printed (PYTHON: this interpreter, by its full path)."""
        args = build().parse_args(["astraeus", "run", *flags])
        args.command = worker_command(seconds)
        spec = build_spec(args, None)
        shown = shlex.join(["astra", "astraeus", "run", *flags, "--", *args.command])
        print(f"$ {shown}", file=self.out)
        self.member.post("/runs", spec)
        print(submitted_line(self.member, spec["name"]), file=self.out, flush=True)
        return str(spec["name"])

    def pause(self) -> None:
        """Sleep a poll interval; raise StoryStoppedError once the demo is stopping."""
        if self.stopping.wait(POLL_SECONDS):
            raise StoryStoppedError

    def run(self, name: str) -> Run:
        return Run.model_validate(self.member.get(f"/runs/{name}"))

    def wait(self, name: str, until: Callable[[Run], bool], what: str) -> Run:
        """Poll the run until `until` holds; after WAIT_SECONDS say it did not, and go on."""
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            run = self.run(name)
            if until(run) or time.monotonic() > deadline:
                break
            self.pause()
        if not until(run):
            self.say(f"{name} is not {what} after {WAIT_SECONDS:g} s; going on")
        return run

    def status(self, name: str, why: bool = False) -> Run:
        """What `astra astraeus status NAME [--why]` prints, from the same answer."""
        answer = self.member.get(f"/runs/{name}")
        self.lines(status_lines(answer))
        task = explained_task(answer)
        if why and task is not None and task["placement"] is not None:
            kind = reason_kind(answer["reason_kind"] or task["reason_kind"])
            self.lines(why_lines(task["placement"], kind, task["rejections"]))
        return Run.model_validate(answer)

    def log(self, task: str) -> list[str]:
        """What a task's worker printed (`astra astraeus logs TASK`)."""
        return LogView.model_validate(self.member.get(f"/tasks/{task}/logs")).data.splitlines()

    def first_words(self, task: str) -> list[str]:
        """The task's log once its worker has printed something (it says what it was given)."""
        deadline = time.monotonic() + WAIT_SECONDS
        while not (printed := self.log(task)) and time.monotonic() < deadline:
            self.pause()
        return printed

    def machine_list(self) -> list[MachineView]:
        return MachineList.model_validate(self.member.get("/machines")).machines


def running(run: Run) -> bool:
    return bool(run.tasks) and all(t.state == TaskState.RUNNING for t in run.tasks)


def evaluated(run: Run) -> bool:
    return run.state == RunState.PENDING and placement_of(run.model_dump(mode="json")) is not None


def cluster_up(story: Story) -> None:
    story.chapter("The cluster: fake machines on loopback, each with a real agent")
    story.admin.post("/machines/eth-2/cordon", {"reason": "firmware update"})
    story.say("eth-2 cordoned: firmware update")
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        listed = story.machine_list()
        if sum(m.state == "Up" and m.gpus_total > 0 for m in listed) >= story.machines:
            break
        story.pause()
    verb = "reports" if len(listed) == 1 else "report"
    story.say(f"{plural(len(listed), 'machine')} {verb} to the coordinator")
    story.lines(machine_rows([m.model_dump(mode="json") for m in listed]))


def shapes(story: Story) -> None:
    story.chapter("Shapes: ask for GPUs, the scheduler picks the machines and the network")
    story.submit(["--name", "pretrain", "--gpus", "16", "--cpus", "4", "--mem", "16G"], PRETRAIN)
    story.wait("pretrain", running, "running")
    story.say("pretrain runs: 16 GPUs as 2 × 8, inside one InfiniBand fabric and one rack")
    story.status("pretrain")


def healthy_only(story: Story) -> None:
    story.chapter("healthy_only waits, and says why, machine by machine")
    flags = ["--gpus", "8", "--gpu-model", "H100", "--gpus-per-machine", "8"]
    story.submit(["--name", "careful", *flags, "--healthy-only"], 3)
    story.wait("careful", evaluated, "evaluated")
    story.say("careful waits; `astra astraeus status careful --why` shows what keeps each out:")
    story.status("careful", why=True)


def ladder(story: Story) -> None:
    story.chapter("The ladder: each run gets the tightest network there is room on")
    story.submit(["--name", "moe", "--gpus", "8", "--gpu-model", "GB200"], 8)
    story.submit(["--name", "allreduce", "--gpus", "8", "--gpu-model", "L40S"], 8)
    story.submit(["--name", "notebook", "--gpus", "2"], 8)
    for name in ("moe", "allreduce", "notebook"):
        story.wait(name, running, "running")
        story.status(name)


def at_risk_fallback(story: Story) -> None:
    story.chapter(
        "At-risk GPUs: used only when no healthy one is free, and never with healthy_only"
    )
    flags = ["--gpus", "8", "--gpu-model", "H100", "--gpus-per-machine", "8"]
    story.submit(["--name", "risky", *flags], 3)
    run = story.wait("risky", running, "running")
    story.status("risky")
    machine = run.tasks[0].machine if run.tasks else None
    if machine is not None:
        answer = story.member.get(f"/machines/{machine}")
        detail = MachineDetail.model_validate(answer)
        signals = signals_of(answer)
        for gpu in detail.gpus:
            if gpu.health == "at_risk":
                why = signals[gpu.uuid]
                story.say(f"{machine} gpu {gpu.index} is at risk ({why}), held by {gpu.task}")


def starts_when_another_ends(story: Story) -> None:
    story.chapter("A waiting run starts when another ends")
    story.wait("pretrain", lambda run: run.state.ended, "finished")
    story.say("pretrain ended:")
    story.status("pretrain")
    story.wait("careful", running, "running")
    story.say("careful starts on the healthy GPUs pretrain gave back:")
    story.status("careful")
    story.say("what pretrain's workers printed (`astra astraeus logs pretrain-0`):")
    log = LogView.model_validate(story.member.get("/tasks/pretrain-0/logs"))
    story.lines(log.data.splitlines())


def ended(run: Run) -> bool:
    return run.state.ended


def workers_share_a_machine(story: Story) -> None:
    story.chapter("mode: Any — workers may share a machine")
    story.wait("notebook", ended, "finished")
    flags = ["--name", "shards", "--gpus", "2", "--machines", "2", "--mode", "Any"]
    story.submit([*flags, "--names", "eth-1"], 3)
    story.wait("shards", running, "running")
    story.say("shards runs two workers on eth-1, each with its own GPU and LOCAL_RANK:")
    story.status("shards")
    story.lines(story.first_words("shards-1"))


def next_to_its_drive(story: Story) -> None:
    story.chapter("Drives: a run goes where its data is")
    story.wait("allreduce", ended, "finished")
    story.submit(["--name", "prep", "--gpus", "1", "--drive", "datasets=/data"], 3)
    story.wait("prep", running, "running")
    story.say(
        "prep runs on roce-2, which holds datasets (+40); roce-1 and eth-1 reach it over the "
        "network, and roce-1 is its neighbour in rack-r1 (+15):"
    )
    story.status("prep")
    story.lines(story.first_words("prep-0"))


CHAPTERS = (
    cluster_up,
    shapes,
    healthy_only,
    ladder,
    at_risk_fallback,
    starts_when_another_ends,
    workers_share_a_machine,
    next_to_its_drive,
)


def tell(story: Story) -> None:
    """Every chapter in order, until the end or until the demo stops."""
    try:
        for chapter in CHAPTERS:
            chapter(story)
    except StoryStoppedError:
        return
