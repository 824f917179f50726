"""`astraeus-agent`: the node agent's entry point."""

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence

from aiohttp import web

from .api import create_app
from .backends.select import UnknownBackendError
from .fake import FakeMachineError
from .inventory import scanner_for
from .runtime.launch import inspect_launcher
from .runtime.users import DYNAMIC, WorkerUserError, worker_users
from .scanning import ScanService
from .settings import MachineSettings, ServeSettings, load_command
from .table import render
from .watch import udev_monitor

USAGE = """\
usage: astraeus-agent <command> [options]

The Astraeus node agent runs on every GPU machine: it discovers GPUs, classifies their health,
reports to the coordinator and launches the workers it is assigned.

commands:
  run       report to the coordinator and run the workers it assigns (the systemd service);
            `astraeus-agent --coordinator URL --token-file PATH ...` is the same
  inspect   print this machine's report once, as a table or --json; no server, no coordinator
  serve     scan continuously and serve the local API (loopback by default)

Run `astraeus-agent <command> --help` for a command's options.
"""

COMMANDS = ("inspect", "serve")


def inspect(settings: MachineSettings, as_json: bool) -> int:
    """One scan, printed; read-only: the data directory (the running agent's known GPUs and
    faults) is read, never written."""
    scanner = scanner_for(settings, read_only=True)
    try:
        report = scanner.scan()
    finally:
        scanner.close()
    if as_json:
        print(json.dumps(report.model_dump(mode="json"), indent=2))
    else:
        print(render(report, scanner.warnings, workers_line(), gpu_workers_line()), end="")
    return 0


def gpu_workers_line() -> str:
    """What GPU workers get here beyond their command (a private /dev/shm, unlimited locked
    memory), by the way the agent would start them on this machine."""
    return inspect_launcher().gives()


def workers_line() -> str:
    """Who this agent would start workers as with the default settings, or why it would not."""
    try:
        return worker_users(DYNAMIC).describe()
    except WorkerUserError as error:
        return f"none: {error}"


def serve(settings: ServeSettings) -> int:
    async def run() -> None:
        service = ScanService(
            scanner_for(settings),
            scan_seconds=settings.scan_seconds,
            monitor_factory=lambda: udev_monitor(settings.udev_source),
        )
        await service.start()
        runner = web.AppRunner(create_app(service))
        await runner.setup()
        await web.TCPSite(runner, settings.host, settings.port).start()
        host, port = runner.addresses[0][:2]  # the real port when --port 0
        print(f"astraeus-agent: serving on http://{host}:{port}/v1/machine", flush=True)
        stop = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(signum, stop.set)
        try:
            await stop.wait()
        finally:
            await runner.cleanup()
            await service.stop()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, end="")
        return 0
    if args[0] == "run" or args[0].startswith("--"):
        from .runtime import main as run  # the report loop and worker runner

        return run(args[1:] if args[0] == "run" else args)
    if args[0] not in COMMANDS:
        print(f"astraeus-agent: unknown command {args[0]!r}\n", file=sys.stderr)
        print(USAGE, file=sys.stderr, end="")
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        settings, parsed = load_command(args[0], args[1:], os.environ)
        if isinstance(settings, ServeSettings):
            return serve(settings)
        return inspect(settings, parsed.json)
    except SystemExit as exc:  # argparse's own errors and --help
        return int(exc.code or 0)
    except (FakeMachineError, UnknownBackendError, ValueError) as exc:  # SettingsError too
        print(f"astraeus-agent {args[0]}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"astraeus-agent {args[0]}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
