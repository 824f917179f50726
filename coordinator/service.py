"""`astraeus-coordinator`: the coordinator service's entry point."""

import sys
from collections.abc import Sequence

USAGE = """\
usage: astraeus-coordinator [--help]

The Astraeus coordinator keeps the queue in SQLite, places runs on machines and serves the API,
the `astra` CLI and the web console.

Not built yet in this version: the service itself (`--db`, `--listen`, tokens) arrives with the
coordinator issue. What exists today is the shared data model (`astraeus.shared`).
"""


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] not in ("-h", "--help"):
        print(f"astraeus-coordinator: unknown command {args[0]!r}\n", file=sys.stderr)
        print(USAGE, file=sys.stderr, end="")
        return 2
    print(USAGE, end="")
    return 0
