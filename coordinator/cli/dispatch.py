"""Run a parsed `astra` command and turn every failure into a sentence."""

from __future__ import annotations

import sys

from .client import Api
from .config import resolve
from .context import Context, printable
from .errors import CliError, Exit

TYPE_CHECKING = False
if TYPE_CHECKING:
    from argparse import Namespace

NOT_UNDERSTOOD = (
    "astra: the coordinator's answer was not understood; is ASTRA_API an Astraeus coordinator of"
    " this version?"
)
_SHAPE = (KeyError, TypeError, ValueError, AttributeError, IndexError)
"""What reading an answer of another shape raises: a field missing (`KeyError`), of another type
(`TypeError`, `AttributeError`), a word or time this version does not know (`ValueError`, which
pydantic's `ValidationError` is too)."""


def dispatch(args: Namespace) -> int:
    """The command's exit code; a failure is one line on stderr, never a traceback."""
    try:
        if args.product != "astraeus":
            return _local(args)
        ctx = _context(args)
        try:
            return int(args.func(ctx, args))
        except _SHAPE as exc:
            # An answer of the wrong shape: another server or version. Before any answer was
            # read, the fault is astra's own, and its traceback is what a bug report needs.
            if not ctx.api.answers:
                raise
            print(f"{NOT_UNDERSTOOD} ({_first_difference(exc)})", file=sys.stderr)
            return Exit.FAILED
    except CliError as exc:
        print(f"astra: {printable(exc.message)}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130


def _first_difference(exc: Exception) -> str:
    """Where the answer differs from what this version reads, in a few words."""
    validation = getattr(sys.modules.get("pydantic"), "ValidationError", None)
    if validation is not None and isinstance(exc, validation):
        errors = exc.errors()
        first = ".".join(str(p) for p in errors[0]["loc"])
        return f"{exc.error_count()} fields differ, first: {first}"
    if isinstance(exc, KeyError):
        return f"no field {exc.args[0]!r}"
    return printable(str(exc)[:200]) or type(exc).__name__


def _local(args: Namespace) -> int:
    """`astra validate` and `astra demo`: no coordinator to ask."""
    if args.product == "validate":
        from .validate import validate

        return validate(args.file)
    from astraeus.coordinator.demo.main import run_demo

    return run_demo(seconds=args.seconds, state_dir=args.state_dir, port=args.port)


def _context(args: Namespace) -> Context:
    """The coordinator and token the flags, `ASTRA_*` and the config file name."""
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
    return Context(api=Api(target), json=args.output == "json")
