"""`astra demo [--for SECONDS]`: start the cluster, tell the story, stay up until stopped."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import shlex
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from astraeus.coordinator.cli.client import Api
from astraeus.coordinator.cli.config import Target
from astraeus.coordinator.cli.errors import CliError

from .cluster import WORKSPACE, DemoCluster
from .story import Story, tell


def run_demo(*, seconds: float | None, state_dir: str | None, port: int) -> int:
    """Run the demo; 0 when it stopped by itself or on Ctrl-C/SIGTERM."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    keep = state_dir is not None
    root = Path(state_dir or tempfile.mkdtemp(prefix="astraeus-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        asyncio.run(_demo(root, port, seconds))
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


async def _demo(root: Path, port: int, seconds: float | None) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    cluster = DemoCluster(root, port)
    try:
        await cluster.start()
    except OSError as exc:
        await cluster.close()
        why = "the port is in use" if exc.errno == errno.EADDRINUSE else exc.strerror
        raise CliError(f"the demo cannot start on 127.0.0.1:{port}: {why}") from None
    out = sys.stdout
    print(
        f"Astraeus demo: a coordinator on {cluster.url} (SQLite {root / 'astraeus.db'})", file=out
    )
    print(
        f"and {len(cluster.agents)} fake machines with real agents; workers are real processes.",
        file=out,
    )
    print(FOLLOW_ALONG, file=out)
    print(f"  {follow_along(cluster)}", file=out, flush=True)
    config = root / "no-config.toml"
    story = Story(
        member=Api(Target(cluster.url, cluster.member_token, None, config)),
        admin=Api(Target(cluster.url, cluster.admin_token, None, config)),
        machines=len(cluster.agents),
    )
    try:
        told = asyncio.ensure_future(asyncio.to_thread(tell, story))
        stopped = asyncio.ensure_future(stop.wait())
        await asyncio.wait({told, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if not told.done():
            story.stopping.set()
            await told
        else:
            _banner(cluster, seconds)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopped, seconds)
        stopped.cancel()
    finally:
        print("\nStopping the demo: workers, agents, coordinator.", file=out, flush=True)
        await cluster.close()
    print("Demo stopped.", file=out, flush=True)


FOLLOW_ALONG = "To follow along in another shell, paste this line there first:"


def astra_dir() -> Path:
    """The folder of the `astra` that started the demo (the venv's bin, or a release's)."""
    called = sys.argv[0]
    found = called if os.sep in called else shutil.which(called)
    return Path(os.path.abspath(found)).parent if found else Path(sys.executable).parent


def follow_along(cluster: DemoCluster) -> str:
    """One line that makes `astra` (and the demo's worker command) work in another shell."""
    path = shlex.quote(str(astra_dir()))
    return f'export PATH={path}:"$PATH" ASTRA_API={cluster.url} ASTRA_TOKEN={cluster.member_token}'


def _banner(cluster: DemoCluster, seconds: float | None) -> None:
    console = f"{cluster.url}/console/"
    lines = [
        "",
        "The demo cluster stays up:",
        f"  API       {cluster.url}/api/v1  (OpenAPI at {cluster.url}/api/v1/openapi.json)",
        f"  console   {console}",
        f"  token     {cluster.member_token}  (workspace {WORKSPACE})",
        f"  admin     {cluster.admin_token}",
        "Try, in another shell:",
        f"  {follow_along(cluster)}",
        "  astra astraeus machines",
        "  astra astraeus status careful --why",
        "  astra astraeus logs pretrain",
        "The guide's first example waits here, for a container runtime the demo's machines lack",
        "(`status finetune --why` says `machine lacks capability container` and how to get one):",
        "  astra astraeus run --name finetune --image nvcr.io/nvidia/pytorch:24.08-py3 "
        "--gpus 8 --cpus 12 --mem 120G -- python finetune.py",
        "  astra astraeus status finetune --why",
        f"Stopping in {seconds:g} s." if seconds is not None else "Press Ctrl-C to stop.",
    ]
    print("\n".join(lines), flush=True)
