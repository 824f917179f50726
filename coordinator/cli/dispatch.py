"""Run a parsed `astra` command and turn every failure into a sentence."""

from __future__ import annotations

import sys
from argparse import Namespace

from pydantic import ValidationError

from .client import Api
from .config import resolve
from .context import Context, printable
from .errors import CliError, Exit


def dispatch(args: Namespace) -> int:
    """The command's exit code; a failure is one line on stderr, never a traceback."""
    try:
        return _call(args)
    except ValidationError as exc:  # an answer of the wrong shape: another server or version
        print(
            "astra: the coordinator's answer was not understood; is ASTRA_API an Astraeus "
            f"coordinator of this version? ({exc.error_count()} fields differ, first: "
            f"{'.'.join(str(p) for p in exc.errors()[0]['loc'])})",
            file=sys.stderr,
        )
        return Exit.FAILED
    except CliError as exc:
        print(f"astra: {printable(exc.message)}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130


def _call(args: Namespace) -> int:
    if args.product == "validate":
        from .validate import validate

        return validate(args.file)
    if args.product == "demo":
        from astraeus.coordinator.demo.main import run_demo

        return run_demo(seconds=args.seconds, state_dir=args.state_dir, port=args.port)
    if args.command_line and args.verb != "run":
        raise CliError("only `run` takes a command after --", Exit.USAGE)
    args.command = args.command_line if args.verb == "run" else None
    target = resolve(
        api=args.api,
        token=args.token,
        workspace=args.workspace,
        ca_file=args.ca_file,
        token_file=args.token_file,
        allow_plain_http=args.allow_plain_http,
    )
    ctx = Context(api=Api(target), json=args.output == "json")
    return int(args.func(ctx, args))
