"""The `astra` command line: `astra astraeus <command>`, `astra demo`, `astra validate`."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple, NoReturn

from .flags import add_run_flags, number

if TYPE_CHECKING:
    from .context import Context

Command = Callable[["Context", argparse.Namespace], int]

PRODUCTS = ("astraeus", "demo", "validate")

DESCRIPTION = """\
Submit GPU runs to an Astraeus cluster and see where they run, or why they wait.

The coordinator is found from --api, then ASTRA_API, then `api` in the config file
(ASTRA_CONFIG, default ~/.config/astra/config.toml), else http://127.0.0.1:8470; each may list
every coordinator of the cluster, comma-separated, and astra talks to whichever leads. The token
likewise from --token or --token-file, ASTRA_TOKEN or `token` (--token shows in `ps` to every
user of the machine: prefer the others), and the CA that signed an https coordinator's
certificate from --ca-file, ASTRA_CA or `ca_file` (else the system's CA store). Exit codes:
0 done, 1 refused, 2 bad input, 3 coordinator unreachable, 4 token missing or not allowed,
5 no such run, task or machine."""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and a hint, not the whole usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"astra: {message}\n{hint(self.prog)}\n")

    def _get_formatter(self) -> argparse.HelpFormatter:
        """argparse's formatter, told the width argparse would find: without it, each
        `add_argument` imports `shutil` (and zlib, bz2 and lzma with it) to ask the terminal."""
        width = terminal_columns() - 2  # every argparse formatter takes it; typeshed says prog
        return self.formatter_class(prog=self.prog, width=width)  # type: ignore[call-arg]


def terminal_columns() -> int:
    """`shutil.get_terminal_size().columns`, found the same way: `COLUMNS`, else the width of
    the terminal on stdout, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    stdout = sys.__stdout__
    try:
        return (os.get_terminal_size(stdout.fileno()).columns if stdout else 0) or 80
    except (AttributeError, ValueError, OSError):
        return 80


def hint(prog: str) -> str:
    return f"Run '{prog} --help' to see what it takes."


def unknown_command(name: str) -> str:
    """What `astra frobnicate` says, on two lines."""
    return f"astra: unknown command {name!r}\n{hint('astra')}"


def unknown_arguments(extras: list[str], args: argparse.Namespace) -> str:
    """What `astra status x --bogus` says: the hint names the command's own `--help`, where
    its flags are listed (`astra astraeus status --help`), not the top's."""
    words = (getattr(args, key, None) for key in ("product", "verb", "action"))
    prog = " ".join(["astra", *(word for word in words if word)])
    return f"astra: unrecognized arguments: {' '.join(extras)}\n{hint(prog)}"


def _common() -> Parser:
    common = Parser(add_help=False)
    common.add_argument("-o", "--output", choices=["text", "json"], default="text")
    common.add_argument(
        "--api",
        metavar="URL[,URL…]",
        help="the coordinator's URL, or every coordinator's, comma-separated: astra talks to "
        "whichever leads (ASTRA_API)",
    )
    common.add_argument(
        "--token", help="an API token (ASTRA_TOKEN); visible in `ps`: prefer --token-file"
    )
    common.add_argument("--token-file", metavar="PATH", help="read the API token from this file")
    common.add_argument(
        "--ca-file", help="the CA of the coordinator's certificate (ASTRA_CA; default: system's)"
    )
    common.add_argument(
        "--workspace", help="the workspace to act in; admins must name it (ASTRA_WORKSPACE)"
    )
    common.add_argument(
        "--allow-plain-http",
        action="store_true",
        help="send the token over plain http:// to another machine (ASTRA_ALLOW_PLAIN_HTTP=1)",
    )
    return common


COMMON_FLAGS = {
    option: action.nargs != 0 for action in _common()._actions for option in action.option_strings
}
"""Every command's flags, to whether each takes a value: `astra` takes them before the
command too (`astra -o json status x`)."""


def _later(where: str) -> Command:
    """The command `module.function`, imported when it runs, so `astra --help` and a usage
    error load no models and no HTTP client."""
    module, name = where.split(".")

    def command(ctx: Context, args: argparse.Namespace) -> int:
        found: Command = getattr(importlib.import_module(f"{__package__}.{module}"), name)
        return found(ctx, args)

    return command


def _add(
    sub: argparse._SubParsersAction[Parser],
    name: str,
    where: str,
    help_text: str,
    common: Parser,
) -> argparse.ArgumentParser:
    parser = sub.add_parser(name, help=help_text, description=help_text, parents=[common])
    parser.set_defaults(func=_later(where))
    return parser


def build(verb: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; given the `astraeus` command about to run (`status`), only that
    one's parser under `astraeus`: the others (two dozen, with their flags) would be built for
    nothing on every `astra status`. What that command parses, prints for `--help` and says of a
    usage error is the same either way (`tests/cli/test_verbs.py`)."""
    top = Parser(
        prog="astra", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    products = top.add_subparsers(dest="product", metavar="{astraeus,demo,validate}")
    astraeus = products.add_parser("astraeus", help="runs, machines, workspaces and tokens")
    demo = products.add_parser("demo", help="start a demo cluster of fake machines on loopback")
    demo.add_argument(
        "--for",
        dest="seconds",
        type=float,
        metavar="SECONDS",
        help="stop by itself after this long (default: until Ctrl-C)",
    )
    demo.add_argument("--state-dir", help="keep the database and agents' state here")
    demo.add_argument("--port", type=int, default=0, help="the coordinator's port (default: any)")
    validate = products.add_parser("validate", help="check a run spec file without a coordinator")
    validate.add_argument("file")
    _astraeus(astraeus.add_subparsers(dest="verb", metavar="<command>", required=True), verb)
    return top


def _name(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name")


def _machine(parser: argparse.ArgumentParser) -> None:
    """`machine NAME` shows it; `machine forget NAME [--yes]` forgets it (admin)."""
    parser.usage = "%(prog)s [options] NAME\n       %(prog)s [options] forget NAME [--yes]"
    parser.add_argument("name", metavar="NAME", help="the machine; or `forget`, then the machine")
    parser.add_argument("forgotten", nargs="?", metavar="NAME", help=argparse.SUPPRESS)
    parser.add_argument(
        "--yes",
        action="store_true",
        help="forget without asking (needed without a terminal)",
    )


def _status(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name")
    parser.add_argument("--why", action="store_true", help="every machine and what keeps it out")


def _list(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state", help="only runs in this state (Pending, Running, ...)")


def _logs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="a run (all its tasks) or a task (finetune-0)")
    parser.add_argument("-f", "--follow", action="store_true", help="keep printing until it ends")
    parser.add_argument(
        "--attempt",
        type=int,
        metavar="N",
        help="the output of the run's attempt N (`status` lists them), kept after a requeue",
    )


def _cordon(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name")
    parser.add_argument("--reason", default="", help="shown in every pending explanation")


def _label(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name")
    parser.add_argument("labels", nargs="*", metavar="KEY=VALUE")


def _reserve(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name")
    parser.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="for work selecting these labels",
    )
    parser.add_argument("--for-workspace", help="for one workspace ...")
    parser.add_argument("--starts-at", help="... from this time (ISO 8601 with zone)")
    parser.add_argument("--ends-at", help="... until this time")


def _unreserve(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name")
    parser.add_argument("id", type=int)


def _workspace_set(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name")
    parser.add_argument("--pool", action="append", default=[], help="a pool it may use (repeat)")
    parser.add_argument("--gpu-quota", type=int, help="GPUs it may hold at once")
    parser.add_argument(
        "--cpu-quota", type=number, metavar="CORES", help="CPU cores it may hold at once"
    )
    parser.add_argument(
        "--memory-quota", metavar="SIZE", help="memory it may hold at once (512G, 2T)"
    )
    parser.add_argument("--max-priority", type=int, default=0, help="the highest priority allowed")
    parser.add_argument(
        "--fair-share-weight",
        type=number,
        default=1.0,
        metavar="WEIGHT",
        help="its share among runs of equal priority: weight 2 gets about twice weight 1's",
    )
    parser.add_argument(
        "--guaranteed-gpus",
        type=int,
        default=0,
        metavar="N",
        help="GPUs it is guaranteed: lent out while idle, reclaimed when it needs them",
    )


def _token_create(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--role", choices=["admin", "member", "agent"], required=True)
    parser.add_argument("--for-workspace", help="a member token's workspace")
    parser.add_argument("--machine", help="an agent token's machine")
    parser.add_argument("--description", default="")
    parser.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="K=V",
        help="an agent token's machine gets this label from you (pool=h100); repeatable",
    )


def _id(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", type=int)


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    """A command that takes only the common flags."""


class Verb(NamedTuple):
    """One command of `astra astraeus`: its name and help, and either the function that runs
    it (`module.function`, imported when it runs) with its own arguments, or its actions
    (`workspace show`, `workspace set`)."""

    name: str
    help: str
    where: str = ""
    arguments: Callable[[argparse.ArgumentParser], None] = _no_arguments
    actions: tuple[Verb, ...] = ()


COMMANDS: tuple[Verb, ...] = (
    Verb("run", "submit a run (or --dry-run it)", "submit.run", add_run_flags),
    Verb("status", "a run's state and its tasks", "runs.status", _status),
    Verb("list", "the workspace's runs", "runs.list_runs", _list),
    Verb("logs", "a run's or a task's output", "logs.logs", _logs),
    Verb("cancel", "cancel a run", "runs.cancel", _name),
    Verb(
        "delete",
        "delete a run that has ended: its name may be used again, its logs go",
        "runs.delete",
        _name,
    ),
    Verb("machines", "the machines you may use", "machines.machines"),
    Verb(
        "machine",
        "one machine in detail; `machine forget NAME`: forget one that will never return (admin)",
        "machines.machine",
        _machine,
    ),
    Verb("cordon", "stop placing runs on a machine", "machines.cordon", _cordon),
    Verb("uncordon", "accept runs again", "machines.uncordon", _name),
    Verb("label", "set the labels admins give a machine", "machines.label", _label),
    Verb("reserve", "reserve a machine", "machines.reserve", _reserve),
    Verb("unreserve", "drop a reservation", "machines.unreserve", _unreserve),
    Verb("usage", "GPU-hours and fair-share usage per workspace", "usage.usage"),
    Verb(
        "coordinators",
        "each coordinator given (--api, ASTRA_API): leader, standby or unreachable",
        "coordinators.coordinators",
    ),
    Verb("workspaces", "list workspaces (admin)", "admin.workspaces"),
    Verb(
        "workspace",
        "show or set a workspace (admin)",
        actions=(
            Verb("show", "one workspace", "admin.workspace_show", _name),
            Verb("set", "create or replace a workspace", "admin.workspace_set", _workspace_set),
        ),
    ),
    Verb(
        "token",
        "list, create or revoke API tokens (admin)",
        actions=(
            Verb("list", "every token (never the secrets)", "admin.tokens"),
            Verb("create", "print a new token, once", "admin.token_create", _token_create),
            Verb("revoke", "revoke a token", "admin.token_revoke", _id),
        ),
    ),
)
"""Every command of `astra astraeus`, in the order `--help` lists them."""

VERBS = tuple(verb.name for verb in COMMANDS)
"""What `astra <verb>` may start with, short for `astra astraeus <verb>`."""


def command_modules(verbs: tuple[Verb, ...] = COMMANDS) -> list[str]:
    """The modules the commands are imported from by name when they run (`...cli.admin`),
    once each in table order: what a bundler such as PyInstaller cannot find by itself."""
    found: dict[str, None] = {}
    for verb in verbs:
        if verb.where:
            found[f"{__package__}.{verb.where.split('.')[0]}"] = None
        found.update(dict.fromkeys(command_modules(verb.actions)))
    return list(found)


def _astraeus(sub: argparse._SubParsersAction[Parser], only: str | None = None) -> None:
    common = _common()
    for verb in COMMANDS:
        if only is None or verb.name == only:
            _verb(sub, verb, common)


def _verb(sub: argparse._SubParsersAction[Parser], verb: Verb, common: Parser) -> None:
    if not verb.actions:
        verb.arguments(_add(sub, verb.name, verb.where, verb.help, common))
        return
    parent = sub.add_parser(verb.name, help=verb.help)
    names = ",".join(action.name for action in verb.actions)
    actions = parent.add_subparsers(dest="action", metavar=f"{{{names}}}", required=True)
    for action in verb.actions:
        _verb(actions, action, common)
