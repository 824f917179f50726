"""`astra`'s entry point: parse, then hand the command to `dispatch`, which loads what it uses.

The everyday commands are read by `quick.py`, without argparse; every other command line (and
`--help`, and every usage error) by the full parser of `parser.py`, loaded only then."""

from __future__ import annotations

import os
import sys

from .errors import Exit
from .quick import quick_args

TYPE_CHECKING = False
if TYPE_CHECKING:
    from argparse import Namespace
    from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()  # here, not at exit, where a closed pipe's error cannot be caught
        return code
    except BrokenPipeError:  # `astra list | head`: the reader has all it wanted
        _quiet_stdout()
        return Exit.OK


def _main(argv: Sequence[str] | None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    args = quick_args(args_list) or full_args(args_list)
    if isinstance(args, int):
        return args
    # Imported here: `--help` and usage errors never load the client, pydantic or the models.
    from .dispatch import dispatch

    return dispatch(args)


def full_args(args_list: list[str]) -> Namespace | int:
    """`astra`'s command line as argparse reads it, the reference for every one (`quick.py`
    reads the everyday ones alike); or the exit code, once `--help` or a usage error is said."""
    from .parser import PRODUCTS, VERBS, build, unknown_arguments, unknown_command

    command: list[str] = []
    if "--" in args_list:  # everything after `--` is the run's command, untouched
        cut = args_list.index("--")
        args_list, command = args_list[:cut], args_list[cut + 1 :]
    leading, args_list = split_leading_flags(args_list)
    if args_list and not args_list[0].startswith("-") and args_list[0] not in PRODUCTS:
        if args_list[0] not in VERBS:
            print(unknown_command(args_list[0]), file=sys.stderr)
            return Exit.USAGE
        args_list = ["astraeus", *args_list]  # `astra status x` is `astra astraeus status x`
    parser = build(_verb(args_list))
    try:
        # Flags before the command (`astra -o json status x`) are the command's, as after it.
        args, extras = parser.parse_known_args(args_list + leading)
    except SystemExit as done:  # --help, or a usage error argparse already printed
        return int(done.code or 0)
    if extras:
        print(unknown_arguments(extras, args), file=sys.stderr)
        return Exit.USAGE
    args.command_line = command
    if args.product is None:
        parser.print_help()
        return Exit.OK
    return args


def _verb(args: list[str]) -> str | None:
    """The `astraeus` command named (`status` of `astraeus status x`), so that only its parser
    is built; None (build them all) for anything else, such as `astraeus --help`."""
    from .parser import VERBS

    if len(args) > 1 and args[0] == "astraeus" and args[1] in VERBS:
        return args[1]
    return None


def split_leading_flags(args: list[str]) -> tuple[list[str], list[str]]:
    """The common flags given before the command (`-o json`, `--api URL`, `--workspace=w`),
    with their values, and the rest: argparse knows them only after the command."""
    from .parser import COMMON_FLAGS

    at = 0
    while at < len(args):
        flag = args[at].split("=", 1)[0]
        if flag not in COMMON_FLAGS:
            break
        takes_value = COMMON_FLAGS[flag] and "=" not in args[at]
        at += 2 if takes_value else 1
    return args[:at], args[at:]


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so Python's flush at exit raises no second BrokenPipeError."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
