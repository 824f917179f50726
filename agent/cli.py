"""`astraeus-agent`: the node agent's entry point."""

import sys
from collections.abc import Sequence

USAGE = """\
usage: astraeus-agent [--help]

The Astraeus node agent runs on every GPU machine: it discovers GPUs, classifies their health,
reports to the coordinator and launches the workers it is assigned.

Not built yet in this version: discovery (`astraeus-agent inspect`) and the report loop arrive
with the node-agent issues. Nothing runs from this command today.
"""


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] not in ("-h", "--help"):
        print(f"astraeus-agent: unknown command {args[0]!r}\n", file=sys.stderr)
        print(USAGE, file=sys.stderr, end="")
        return 2
    print(USAGE, end="")
    return 0
