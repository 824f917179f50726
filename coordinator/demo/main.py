"""`astra demo [--for SECONDS]`: start the cluster, tell the story, stay up until stopped."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
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
        flush=True,
    )
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


def _banner(cluster: DemoCluster, seconds: float | None) -> None:
    console = f"{cluster.url}/console/"
    lines = [
        "",
        "The demo cluster stays up:",
        f"  API       {cluster.url}/api/v1  (OpenAPI at {cluster.url}/api/v1/openapi.json)",
        f"  console   {console}",
        f"  token     {cluster.member_token}  (workspace {WORKSPACE})",
        f"  admin     {cluster.admin_token}",
        "Try:",
        f"  export ASTRA_API={cluster.url} ASTRA_TOKEN={cluster.member_token}",
        "  astra astraeus machines",
        "  astra astraeus status careful --why",
        f"Stopping in {seconds:g} s." if seconds is not None else "Press Ctrl-C to stop.",
    ]
    print("\n".join(lines), flush=True)
