"""`astra`'s entry point: parse, then hand the command to `dispatch`, which loads what it uses."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .errors import Exit
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
    if args.product is None:
        parser.print_help()
        return Exit.OK
    # Imported here: `--help` and usage errors never load the client, pydantic or the models.
    from .dispatch import dispatch

    return dispatch(args)
