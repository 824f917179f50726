"""`astra demo`: the whole story on fake machines with real agents and real worker processes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import until

from astraeus.agent.runtime import StateDir
from astraeus.agent.runtime.launch import proc_alive
from astraeus.coordinator.cli.render import CONTAINER_HINT
from astraeus.coordinator.demo import main as demo_main
from astraeus.coordinator.demo.main import FOLLOW_ALONG

ASTRA = Path(sys.executable).parent / "astra"
STORY_LIMIT_SECONDS = 240
"""Only a guard against a hung demo; the story itself takes about 20 s."""
FOR_SECONDS = 600
"""`astra demo --for` in the test of the whole story: far longer than running every line it
printed in fresh shells takes (about 10 s; under load 20). The test then stops it with Ctrl-C,
as a user who has seen enough does, instead of sitting out the rest; that `--for` stops the
demo by itself is `test_demo_for_stops_by_itself`'s, without a cluster to wait for."""


def _demo(*argv: str) -> subprocess.Popen[str]:
    """The demo in its own process group, as a terminal runs it (Ctrl-C reaches the group)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASTRA_")}
    return subprocess.Popen(
        [ASTRA, "demo", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )


def _fresh_shell(lines: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    """Run pasted lines in a new shell that has nothing of this one: no venv, no ASTRA_*."""
    return subprocess.run(
        ["/bin/sh", "-c", "\n".join(lines)],
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home)},
        capture_output=True,
        text=True,
        check=False,
        cwd=home,
        timeout=60,
    )


def _no_live_workers(state_dir: Path) -> bool:
    for agent in (state_dir / "agents").iterdir():
        for record in StateDir(agent).records():
            if record.pid is not None and proc_alive(record.pid, record.pid_start):
                return False
    return True


def _tells_the_whole_story(out: str) -> None:
    """The story's lines, each in order after the one before: shapes, the ladder, at-risk
    fallback, healthy_only waiting with per-machine reasons, a run starting when another ends,
    workers sharing a machine in Any mode and a run placed next to its drive."""
    lines = out.splitlines()
    expected = [
        "[",  # machines report
        # Free is what a run could be given now: a cordoned or pressured machine's idle GPUs
        # are shown apart.
        "    eth-2   Up, cordoned        0/2 NVIDIA A10 (2 idle)             2 healthy             "
        "Ethernet           100 Gb/s  rack-e1  lab",
        "    ib-b1   Up                  8/8 NVIDIA H100 80GB HBM3           6 healthy, 2 at risk  "
        "ib-b               100 Gb/s  rack-b1  lab",
        "    ib-b2   Up, MemoryPressure  0/8 NVIDIA H100 80GB HBM3 (8 idle)  8 healthy             "
        "ib-b               100 Gb/s  rack-b2  lab",
        "pretrain submitted to demo: http://127.0.0.1:",
        "    pretrain: Running — 2 machines × 8 GPUs on InfiniBand fabric ib-a in rack rack-a1",
        "    careful: Pending — No machine fits: 10 of 10 machines ready",
        "      careful-0  Pending  -  No machine fits: 10 of 10 machines ready",
        "    Why it is not running yet: 10 machines checked, 10 ready, 0 down; closest: ib-a1",
        "      ib-a1   Up  insufficient gpus: need 8, 0 free and usable",
        "      eth-2   Up  machine is cordoned: firmware update",
        "      ib-b1   Up  needs 8 healthy GPUs, 6 free (2 more free but at risk)",
        "      ib-b2   Up  under pressure: MemoryPressure",
        "      nvl-1   Up  no H100 GPU",
        "    moe: Running — 2 machines × 4 GPUs in NVLink domain "
        "5d1c7a3e-0b4f-4f7e-9a53-6d2e8b1c9f10/1",
        "    allreduce: Running — 2 machines × 4 GPUs over RDMA (RoCE) in rack rack-r1",
        "    notebook: Running — 1 machine × 2 GPUs on eth-1",
        "    risky: Running — 1 machine × 8 GPUs on ib-b1",
        "    pretrain: Succeeded",
        "      pretrain-0  Succeeded  ib-a1  exit 0",
        # ib-a1 or ib-a2, whichever pretrain gives back first:
        "    careful: Running — 1 machine × 8 GPUs on ib-a",
        "      careful-0  Running  ib-a",
        "    pretrain-0 done after 15 s",
        "== mode: Any — workers may share a machine",
        "    shards: Running — 2 workers × 1 GPU on eth-1",
        "      shards-0  Running  eth-1  1 GPU",
        "      shards-1  Running  eth-1  1 GPU",
        "    shards-1 started with 1 GPUs: RANK=1, WORLD_SIZE=2, LOCAL_RANK=1, LOCAL_WORLD_SIZE=2",
        "== Drives: a run goes where its data is",
        "    prep: Running — 1 machine × 1 GPU on roce-2",
        "    prep-0 started with 1 GPUs: RANK=0, WORLD_SIZE=1, LOCAL_RANK=0, LOCAL_WORLD_SIZE=1, "
        "MASTER_ADDR=127.0.0.1, ASTRAEUS_DRIVE_DATASETS=",
        "The demo cluster stays up:",
        f"Stopping in {FOR_SECONDS} s.",
    ]
    position = 0
    for want in expected:  # each in order, after the one before
        found = [i for i, line in enumerate(lines) if i >= position and line.startswith(want)]
        assert found, f"missing, in order: {want!r}\n{out}"
        position = found[0] + 1
    assert any(
        "ib-b1 gpu 1 is at risk (Row remap pending: reset the GPU at the next opportunity), "
        "held by risky-0" in line
        for line in lines
    )


@pytest.mark.slow
def test_demo_stops_cleanly_on_sigint_mid_story(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) while the story runs
    stops workers, agents and coordinator, exit 0, no traceback from any process."""
    demo = _demo("--state-dir", str(tmp_path))
    assert demo.stdout is not None
    for line in demo.stdout:
        if line.startswith("    pretrain: Running"):
            break
    os.killpg(demo.pid, signal.SIGINT)
    out, err = demo.communicate(timeout=STORY_LIMIT_SECONDS)
    assert demo.returncode == 0, err
    assert "Traceback" not in err
    assert out.rstrip().endswith("Demo stopped.")
    assert _no_live_workers(tmp_path)


def test_demo_on_a_busy_port_says_so(tmp_path: Path) -> None:
    """A port already taken is one sentence and exit 1, not a traceback."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        demo = _demo("--port", str(port), "--state-dir", str(tmp_path), "--for", "0")
        _, err = demo.communicate(timeout=STORY_LIMIT_SECONDS)
    assert demo.returncode == 1
    assert err == f"astra: the demo cannot start on 127.0.0.1:{port}: the port is in use\n"


@pytest.mark.slow
def test_the_demo_tells_the_whole_story_and_every_line_it_prints_runs(tmp_path: Path) -> None:
    """`astra demo --for N` tells the whole story (`_tells_the_whole_story`); the follow-along
    line, each `$` command of the story and each `Try` line run as printed in a fresh shell;
    the guide's first example waits for a container runtime, and says how to get one; then
    Ctrl-C stops the demo, exit 0, no traceback, no worker left running. One demo for all of
    it: each costs a story's worth of processes."""
    state = tmp_path / "state"
    demo = _demo("--for", str(FOR_SECONDS), "--state-dir", str(state))
    assert demo.stdout is not None
    printed = []
    for line in demo.stdout:
        printed.append(line.rstrip("\n"))
        if line.startswith(f"Stopping in {FOR_SECONDS} s."):
            break
    home = tmp_path / "home"
    home.mkdir()
    try:
        _tells_the_whole_story("\n".join(printed))
        export = printed[printed.index(FOLLOW_ALONG) + 1]
        assert export.startswith("  export PATH=")
        story = [line[2:] for line in printed if line.startswith("$ astra astraeus run ")]
        assert len(story) == 8
        for command in story:  # already submitted by the demo: refused only for the name
            done = _fresh_shell([export, command], home)
            name = command.split("--name ")[1].split()[0]
            if done.returncode == 0:  # its run had ended: the name is free again
                continue
            assert done.returncode == 1, command
            assert done.stderr.startswith(f"astra: a run named {name!r} is "), command
            assert "cancel that run first" in done.stderr, command
        tries = printed[printed.index("Try, in another shell:") + 1 : -1]
        tries = [line for line in tries if line.startswith("  ")]
        assert tries[0] == export
        for command in tries[1:]:
            done = _fresh_shell([export, command], home)
            assert done.returncode == 0, (command, done.stderr)
        # The last line asks why the run just submitted waits: its reason is written by the
        # coordinator's next pass, which a quick `astra` can ask before (then the headline has
        # no reason yet). A user asks again; so does the test, with the line as printed.
        asking = next(line for line in tries if "status finetune --why" in line)
        why = until(
            "finetune's reason, from its Try line as printed",
            lambda: _why_lines(_fresh_shell([export, asking], home)),
        )
        assert why[0] == "finetune: Pending — No machine fits: 10 of 10 machines ready"
        assert "  ib-a1   Up  machine lacks capability container" in why
        assert why[-4:] == CONTAINER_HINT
    finally:
        os.killpg(demo.pid, signal.SIGINT)  # Ctrl-C, after the story, as the banner says
        out, err = demo.communicate(timeout=STORY_LIMIT_SECONDS)
    assert demo.returncode == 0, err
    assert "Traceback" not in err
    assert out.rstrip().endswith("Demo stopped.")
    assert _no_live_workers(state)


class _StillCluster:
    """What `_demo` asks of a `DemoCluster`, with no process behind it."""

    url = "http://127.0.0.1:8470"
    member_token = "member-token"  # noqa: S105 - never sent: no coordinator behind it
    admin_token = "admin-token"  # noqa: S105 - never sent either
    agents: tuple[object, ...] = ()

    def __init__(self, root: Path, port: int) -> None:
        self.closed = False

    async def start(self) -> None:
        """Nothing to start."""

    async def close(self) -> None:
        self.closed = True


def test_demo_for_stops_by_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--for N`: after the story and its banner the demo waits N seconds and stops by itself,
    closing its cluster, exit 0. The story and its processes are the other tests'; here the
    story is told at once, and nothing but the timer stops the demo."""
    clusters: list[_StillCluster] = []

    def cluster(root: Path, port: int) -> _StillCluster:
        clusters.append(_StillCluster(root, port))
        return clusters[-1]

    monkeypatch.setattr(demo_main, "DemoCluster", cluster)
    monkeypatch.setattr(demo_main, "tell", lambda story: None)
    assert demo_main.run_demo(seconds=0.2, state_dir=str(tmp_path), port=0) == 0
    out = capsys.readouterr().out
    assert "\nStopping in 0.2 s.\n\nStopping the demo: workers, agents, coordinator.\n" in out
    assert out.endswith("Demo stopped.\n")
    assert [c.closed for c in clusters] == [True]


def _why_lines(done: subprocess.CompletedProcess[str]) -> list[str] | None:
    """The lines `status finetune --why` printed, once its headline carries a reason."""
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    return lines if lines and " — " in lines[0] else None
