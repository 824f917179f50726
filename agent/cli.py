"""`astraeus-agent`: the node agent's entry point."""

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from aiohttp import web

from .api import DEFAULT_HOST, DEFAULT_PORT, create_app
from .backends.select import UnknownBackendError
from .fake import FakeMachineError
from .inventory import Scanner, default_data_dir
from .runtime.settings import parse_label
from .runtime.users import DYNAMIC, WorkerUserError, worker_users
from .scanning import SCAN_SECONDS, ScanService
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


def _parser(command: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"astraeus-agent {command}")
    parser.add_argument(
        "--name",
        default="",
        help="machine name to report (default: the hostname, or the fake machine's name)",
    )
    parser.add_argument(
        "--backend",
        default="auto",
        help="auto, nvml, amdsmi, intel, none or fake:FILE (a path or a shipped machine name)",
    )
    parser.add_argument("--sysfs-root", type=Path, default=Path("/sys"))
    parser.add_argument("--proc-root", type=Path, default=Path("/proc"))
    parser.add_argument("--dev-root", type=Path, default=Path("/dev"))
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    parser.add_argument("--label", action="append", default=[], metavar="KEY=VALUE")
    if command == "inspect":
        parser.add_argument("--json", action="store_true", help="print the report as JSON")
    else:
        parser.add_argument("--host", default=DEFAULT_HOST)
        parser.add_argument("--port", type=int, default=DEFAULT_PORT)
        parser.add_argument("--scan-seconds", type=float, default=SCAN_SECONDS)
        parser.add_argument(
            "--udev-source",
            choices=("udev", "kernel"),
            default="udev",
            help="kernel: in a container that sees the host's kernel events but not its udevd",
        )
    return parser


def _labels(pairs: list[str]) -> dict[str, str]:
    return dict(parse_label(pair) for pair in pairs)


def _scanner(args: argparse.Namespace) -> Scanner:
    return Scanner(
        name=args.name,
        backend=args.backend,
        sysfs_root=args.sysfs_root,
        proc_root=args.proc_root,
        dev_root=args.dev_root,
        data_dir=args.data_dir,
        labels=_labels(args.label),
    )


def inspect(args: argparse.Namespace) -> int:
    scanner = _scanner(args)
    try:
        report = scanner.scan()
    finally:
        scanner.close()
    if args.json:
        print(json.dumps(report.model_dump(mode="json"), indent=2))
    else:
        print(render(report, scanner.warnings, workers_line()), end="")
    return 0


def workers_line() -> str:
    """Who this agent would start workers as with the default settings, or why it would not."""
    try:
        return worker_users(DYNAMIC).describe()
    except WorkerUserError as error:
        return f"none: {error}"


def serve(args: argparse.Namespace) -> int:
    async def run() -> None:
        service = ScanService(
            _scanner(args),
            scan_seconds=args.scan_seconds,
            monitor_factory=lambda: udev_monitor(args.udev_source),
        )
        await service.start()
        runner = web.AppRunner(create_app(service))
        await runner.setup()
        await web.TCPSite(runner, args.host, args.port).start()
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
        parsed = _parser(args[0]).parse_args(args[1:])
        return inspect(parsed) if args[0] == "inspect" else serve(parsed)
    except SystemExit as exc:  # argparse's own errors and --help
        return int(exc.code or 0)
    except (FakeMachineError, UnknownBackendError, ValueError) as exc:
        print(f"astraeus-agent {args[0]}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"astraeus-agent {args[0]}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
