"""`astra`: the user's command line."""

import sys
from collections.abc import Sequence

USAGE = """\
usage: astra astraeus <command> [options]

Submit GPU runs to an Astraeus cluster and see where they run, or why they wait.

Commands (arriving with the CLI issue): run, status, list, logs, cancel, machines, machine,
cordon, uncordon.

What exists today: the shared data model. Validate a run spec with
  astra validate FILE.json
"""


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, end="")
        return 0
    if args[0] == "validate" and len(args) == 2:
        return _validate(args[1])
    print(f"astra: unknown command {' '.join(args)!r}\n", file=sys.stderr)
    print(USAGE, file=sys.stderr, end="")
    return 2


def _validate(path: str) -> int:
    from pydantic import ValidationError

    from astraeus.shared import RunSpec, describe

    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        print(f"astra: cannot read {path}: {exc.strerror}", file=sys.stderr)
        return 2
    try:
        spec = RunSpec.model_validate_json(text)
    except ValidationError as exc:
        print(f"astra: {path} is not a valid run:\n{describe(RunSpec, exc)}", file=sys.stderr)
        return 1
    print(f"{spec.name}: valid")
    return 0
