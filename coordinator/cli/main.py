"""`astra`'s entry point: parse, call the command, turn every failure into a sentence."""

from __future__ import annotations

import sys
from argparse import ArgumentParser, Namespace
from collections.abc import Sequence

from pydantic import ValidationError

from .client import Api
from .config import resolve
from .context import Context
from .errors import CliError, Exit
from .parser import PRODUCTS, VERBS, build, unknown_command


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in args_list:  # everything after `--` is the run's command, untouched
        cut = args_list.index("--")
        args_list, command = args_list[:cut], args_list[cut + 1 :]
    if args_list and not args_list[0].startswith("-") and args_list[0] not in PRODUCTS:
        if args_list[0] not in VERBS:
            print(unknown_command(args_list[0]), file=sys.stderr)
            return Exit.USAGE
        args_list = ["astraeus", *args_list]  # `astra status x` is `astra astraeus status x`
    parser = build()
    try:
        args = parser.parse_args(args_list)
    except SystemExit as done:  # --help, or a usage error argparse already printed
        return int(done.code or 0)
    args.command_line = command
    try:
        return _dispatch(parser, args)
    except ValidationError as exc:  # an answer of the wrong shape: another server or version
        print(
            "astra: the coordinator's answer was not understood; is ASTRA_API an Astraeus "
            f"coordinator of this version? ({exc.error_count()} fields differ, first: "
            f"{'.'.join(str(p) for p in exc.errors()[0]['loc'])})",
            file=sys.stderr,
        )
        return Exit.FAILED
    except CliError as exc:
        print(f"astra: {exc.message}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130


def _dispatch(parser: ArgumentParser, args: Namespace) -> int:
    if args.product is None:
        parser.print_help()
        return Exit.OK
    if args.product == "validate":
        from .validate import validate

        return validate(args.file)
    if args.product == "demo":
        from astraeus.coordinator.demo.main import run_demo

        return run_demo(seconds=args.seconds, state_dir=args.state_dir, port=args.port)
    if args.command_line and args.verb != "run":
        raise CliError("only `run` takes a command after --", Exit.USAGE)
    args.command = args.command_line if args.verb == "run" else None
    target = resolve(api=args.api, token=args.token, workspace=args.workspace, ca_file=args.ca_file)
    ctx = Context(api=Api(target), json=args.output == "json")
    return int(args.func(ctx, args))
