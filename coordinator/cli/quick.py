"""The everyday commands' arguments read without argparse (issue 29): `status NAME`, `list`,
`logs NAME`, `machines`, `machine NAME` and `run` (with or without `--dry-run`).

Building argparse's parser for `astra status x` costs more than asking the coordinator and
printing its answer. These commands take a few flags, so they are read here from a table, into
the namespace argparse would have made (`tests/cli/test_quick.py` parses the same command lines
both ways and compares them). Whatever the table does not know for certain (`--help`, a flag of
another command, an abbreviated flag, `-ojson`, a value that starts with `-`, a value argparse
would check against a list of choices, one that is not a number where a number is wanted) is
left to the full command line in `parser.py`, which stays the reference: it reads it, or says
what is wrong, as it always has. `quick_args` answers None for those.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` alone costs a tenth of `astra status`
    from argparse import Namespace
    from collections.abc import Callable, Sequence

    from .context import Context

    Convert = Callable[[str], object]

VALUE = "value"
"""A flag that takes a value, kept as written (`--name x`, `--name=x`)."""
TRUE = "true"
"""A flag without a value that sets its field to True (`store_true`)."""
FALSE = "false"
"""A flag without a value that sets its field to False (`--not-preemptible`)."""
APPEND = "append"
"""A flag that may repeat, each value added to a list (`--label`, `--env`)."""


def _int(text: str) -> int:
    return int(text)


def _number(text: str) -> int | float:
    """`flags.number`, which argparse calls for `--cpus`: `12` stays whole, `0.5` does not."""
    value = float(text)
    return int(value) if value.is_integer() else value


class Flag:
    """One flag: the field it sets, how (`VALUE`, `TRUE`, `FALSE`, `APPEND`), the field's value
    when it is not given, and what turns its text into the value (None: kept as text). A value
    `convert` refuses is argparse's to say (`--gpus two`)."""

    __slots__ = ("convert", "default", "dest", "kind")

    def __init__(
        self, dest: str, kind: str = VALUE, default: object = None, convert: Convert | None = None
    ) -> None:
        self.dest = dest
        self.kind = kind
        self.default = default
        self.convert = convert


COMMON: dict[str, Flag] = {
    "-o": Flag("output", default="text"),
    "--output": Flag("output", default="text"),
    "--api": Flag("api"),
    "--token": Flag("token"),
    "--token-file": Flag("token_file"),
    "--ca-file": Flag("ca_file"),
    "--workspace": Flag("workspace"),
    "--allow-plain-http": Flag("allow_plain_http", TRUE, False),
}
"""Every command's flags (`parser._common`); a test keeps the two the same."""
OUTPUTS = ("text", "json")

RUN: dict[str, Flag] = {
    "-f": Flag("file"),
    "--file": Flag("file"),
    "--name": Flag("name"),
    "--image": Flag("image"),
    "--gpus": Flag("gpus", convert=_int),
    "--cpus": Flag("cpus", convert=_number),
    "--mem": Flag("mem"),
    "--pool": Flag("pool"),
    "--gpu-model": Flag("gpu_model", APPEND),
    "--gpu-memory": Flag("gpu_memory", convert=_number),
    "--healthy-only": Flag("healthy_only", TRUE, False),
    "--machines": Flag("machines", convert=_int),
    "--min-machines": Flag("min_machines", convert=_int),
    "--max-machines": Flag("max_machines", convert=_int),
    "--gpus-per-machine": Flag("gpus_per_machine", convert=_int),
    "--rdma-gbps": Flag("rdma_gbps", convert=_number),
    "--patience": Flag("patience"),
    "--label": Flag("label", APPEND),
    "--names": Flag("names", APPEND),
    "--site": Flag("site"),
    "--priority": Flag("priority", convert=_int),
    "--time-limit": Flag("time_limit"),
    "--retries": Flag("retries", convert=_int),
    "--retry-on-failure": Flag("retry_on_failure", TRUE),
    "--not-preemptible": Flag("preemptible", FALSE),
    "--env": Flag("env", APPEND),
    "--drive": Flag("drive", APPEND),
    "--dry-run": Flag("dry_run", TRUE, False),
}
"""`run`'s flags (`flags.add_run_flags`) but those argparse checks against a list of choices
(`--vendor`, `--interconnect`, `--keep-within`, `--spread`, `--mode`): those go the full way."""
RUN_ONLY_FULL = ("vendor", "interconnect", "keep_within", "spread", "mode")
"""`run`'s fields only the full command line sets: None here, as argparse leaves them."""


class Verb:
    """An everyday command: its positional fields, its own flags, and the function that runs
    it (`module.function`, imported when it runs); `full_only`, the fields only the full
    command line sets (None here, as argparse leaves them when they are not given)."""

    __slots__ = ("flags", "full_only", "positionals", "where")

    def __init__(
        self,
        where: str,
        positionals: tuple[str, ...],
        flags: dict[str, Flag],
        full_only: tuple[str, ...] = (),
    ) -> None:
        self.where = where
        self.positionals = positionals
        self.flags = flags
        self.full_only = full_only


VERBS: dict[str, Verb] = {
    "status": Verb("runs.status", ("name",), {"--why": Flag("why", TRUE, False)}),
    "list": Verb("runs.list_runs", (), {"--state": Flag("state")}),
    "logs": Verb(
        "logs.logs",
        ("name",),
        {
            "-f": Flag("follow", TRUE, False),
            "--follow": Flag("follow", TRUE, False),
            "--attempt": Flag("attempt", convert=_int),
        },
    ),
    "machines": Verb("machines.machines", (), {}),
    "machine": Verb(
        "machines.machine", ("name",), {"--yes": Flag("yes", TRUE, False)}, ("forgotten",)
    ),
    "run": Verb("submit.run", (), RUN, RUN_ONLY_FULL),
}
"""`machine NAME` shows one machine; `machine forget NAME` (two words) is the full parser's."""


class _FullParserError(Exception):
    """The command line is the full parser's to read."""


def quick_args(argv: Sequence[str]) -> Namespace | None:
    """`argv` read as argparse reads it (`main`'s namespace: `product`, `verb`, every flag's
    field, `func`, `command_line`), for an everyday command; None for anything else."""
    words = list(argv)
    command: list[str] = []
    if "--" in words:  # everything after `--` is the run's command, untouched
        cut = words.index("--")
        words, command = words[:cut], words[cut + 1 :]
    try:
        found = _read(words)
    except (_FullParserError, ValueError):
        return None
    found["command_line"] = command
    # argparse's `Namespace` and this one answer the same attribute reads; importing argparse
    # to build one is what this module is for avoiding.
    return Args(found)  # type: ignore[return-value]


class Args:
    """The fields read, as attributes, as `argparse.Namespace` holds them."""

    def __init__(self, fields: dict[str, object]) -> None:
        self.__dict__.update(fields)


def _read(words: list[str]) -> dict[str, object]:
    fields: dict[str, object] = {}
    at = _flags(words, 0, COMMON, fields)
    leading = fields  # given before the command: they win over the same flags after it
    fields = {}
    if at < len(words) and words[at] == "astraeus":
        at += 1
    if at >= len(words) or words[at] not in VERBS:
        raise _FullParserError
    name = words[at]
    verb = VERBS[name]
    positionals: list[str] = []
    at += 1
    while at < len(words):
        if words[at].startswith("-"):
            at = _flags(words, at, {**COMMON, **verb.flags}, fields)
        else:
            positionals.append(words[at])
            at += 1
    if len(positionals) != len(verb.positionals):
        raise _FullParserError
    found = _defaults(verb)
    found.update(zip(verb.positionals, positionals, strict=True))
    found.update(fields)
    found.update(leading)
    if found["output"] not in OUTPUTS:
        raise _FullParserError
    found["product"] = "astraeus"
    found["verb"] = name
    found["func"] = _later(verb.where)
    return found


def _defaults(verb: Verb) -> dict[str, object]:
    found: dict[str, object] = {}
    for flag in (*COMMON.values(), *verb.flags.values()):
        found[flag.dest] = [] if flag.kind == APPEND else flag.default
    found.update(dict.fromkeys(verb.full_only))
    return found


def _flags(words: list[str], at: int, known: dict[str, Flag], fields: dict[str, object]) -> int:
    """Read the flags from `words[at]` on, into `fields`, up to the first word that is not a
    flag; returns where it stopped. A flag not in `known`, or written as argparse alone would
    read it, raises `_FullParserError`."""
    while at < len(words) and words[at].startswith("-"):
        word = words[at]
        name, equals, value = word.partition("=")
        flag = known.get(name)
        if flag is None or (equals and not name.startswith("--")):
            raise _FullParserError
        if flag.kind in (TRUE, FALSE):
            if equals:
                raise _FullParserError
            fields[flag.dest] = flag.kind == TRUE
            at += 1
            continue
        if not equals:
            if at + 1 >= len(words) or words[at + 1].startswith("-"):
                raise _FullParserError
            value = words[at + 1]
            at += 1
        at += 1
        converted = flag.convert(value) if flag.convert is not None else value
        if flag.kind == APPEND:
            listed = fields.setdefault(flag.dest, [])
            assert isinstance(listed, list)  # noqa: S101 - set just above, or by an earlier one
            listed.append(converted)
        else:
            fields[flag.dest] = converted
    return at


def _later(where: str) -> Callable[[Context, Namespace], int]:
    """The command `module.function`, imported when it runs (as `parser._later` does)."""
    module, name = where.split(".")

    def command(ctx: Context, args: Namespace) -> int:
        found = getattr(__import__(f"{__package__}.{module}", fromlist=[name]), name)
        return int(found(ctx, args))

    return command
