"""The `astra` command line: `astra astraeus <command>`, `astra demo`, `astra validate`."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

from .flags import add_run_flags

if TYPE_CHECKING:
    from .context import Context

Command = Callable[["Context", argparse.Namespace], int]

PRODUCTS = ("astraeus", "demo", "validate")
VERBS = (
    "run", "status", "list", "logs", "cancel", "machines", "machine", "cordon", "uncordon",
    "label", "reserve", "unreserve", "workspaces", "workspace", "token",
)  # fmt: skip

DESCRIPTION = """\
Submit GPU runs to an Astraeus cluster and see where they run, or why they wait.

The coordinator is found from --api, then ASTRA_API, then `api` in the config file
(ASTRA_CONFIG, default ~/.config/astra/config.toml), else http://127.0.0.1:8470; the token
likewise from --token or --token-file, ASTRA_TOKEN or `token` (--token shows in `ps` to every
user of the machine: prefer the others), and the CA that signed an https coordinator's
certificate from --ca-file, ASTRA_CA or `ca_file` (else the system's CA store). Exit codes:
0 done, 1 refused, 2 bad input, 3 coordinator unreachable, 4 token missing or not allowed,
5 no such run, task or machine."""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and a hint, not the whole usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"astra: {message}\n{hint(self.prog)}\n")


def hint(prog: str) -> str:
    return f"Run '{prog} --help' to see what it takes."


def unknown_command(name: str) -> str:
    """What `astra frobnicate` says, on two lines."""
    return f"astra: unknown command {name!r}\n{hint('astra')}"


def _common() -> Parser:
    common = Parser(add_help=False)
    common.add_argument("-o", "--output", choices=["text", "json"], default="text")
    common.add_argument("--api", help="the coordinator's URL (ASTRA_API)")
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


def build() -> argparse.ArgumentParser:
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
    _astraeus(astraeus.add_subparsers(dest="verb", metavar="<command>", required=True))
    return top


def _astraeus(sub: argparse._SubParsersAction[Parser]) -> None:
    common = _common()
    add_run_flags(_add(sub, "run", "submit.run", "submit a run (or --dry-run it)", common))
    status = _add(sub, "status", "runs.status", "a run's state and its tasks", common)
    status.add_argument("name")
    status.add_argument("--why", action="store_true", help="every machine and what keeps it out")
    listing = _add(sub, "list", "runs.list_runs", "the workspace's runs", common)
    listing.add_argument("--state", help="only runs in this state (Pending, Running, ...)")
    logs = _add(sub, "logs", "logs.logs", "a run's or a task's output", common)
    logs.add_argument("name", help="a run (all its tasks) or a task (finetune-0)")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing until it ends")
    _add(sub, "cancel", "runs.cancel", "cancel a run", common).add_argument("name")
    _add(sub, "machines", "machines.machines", "the machines you may use", common)
    _add(sub, "machine", "machines.machine", "one machine in detail", common).add_argument("name")
    cordon = _add(sub, "cordon", "machines.cordon", "stop placing runs on a machine", common)
    cordon.add_argument("name")
    cordon.add_argument("--reason", default="", help="shown in every pending explanation")
    _add(sub, "uncordon", "machines.uncordon", "accept runs again", common).add_argument("name")
    label = _add(sub, "label", "machines.label", "set the labels admins give a machine", common)
    label.add_argument("name")
    label.add_argument("labels", nargs="*", metavar="KEY=VALUE")
    reserve = _add(sub, "reserve", "machines.reserve", "reserve a machine", common)
    reserve.add_argument("name")
    reserve.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="for work selecting these labels",
    )
    reserve.add_argument("--for-workspace", help="for one workspace ...")
    reserve.add_argument("--starts-at", help="... from this time (ISO 8601 with zone)")
    reserve.add_argument("--ends-at", help="... until this time")
    unreserve = _add(sub, "unreserve", "machines.unreserve", "drop a reservation", common)
    unreserve.add_argument("name")
    unreserve.add_argument("id", type=int)
    _workspace(sub, common)
    _token(sub, common)


def _workspace(sub: argparse._SubParsersAction[Parser], common: Parser) -> None:
    _add(sub, "workspaces", "admin.workspaces", "list workspaces (admin)", common)
    parent = sub.add_parser("workspace", help="show or set a workspace (admin)")
    actions = parent.add_subparsers(dest="action", metavar="{show,set}", required=True)
    _add(actions, "show", "admin.workspace_show", "one workspace", common).add_argument("name")
    put = _add(actions, "set", "admin.workspace_set", "create or replace a workspace", common)
    put.add_argument("name")
    put.add_argument("--pool", action="append", default=[], help="a pool it may use (repeat)")
    put.add_argument("--gpu-quota", type=int, help="GPUs it may hold at once")
    put.add_argument("--max-priority", type=int, default=0, help="the highest priority allowed")


def _token(sub: argparse._SubParsersAction[Parser], common: Parser) -> None:
    parent = sub.add_parser("token", help="list, create or revoke API tokens (admin)")
    actions = parent.add_subparsers(dest="action", metavar="{list,create,revoke}", required=True)
    _add(actions, "list", "admin.tokens", "every token (never the secrets)", common)
    create = _add(actions, "create", "admin.token_create", "print a new token, once", common)
    create.add_argument("--role", choices=["admin", "member", "agent"], required=True)
    create.add_argument("--for-workspace", help="a member token's workspace")
    create.add_argument("--machine", help="an agent token's machine")
    create.add_argument("--description", default="")
    create.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="K=V",
        help="an agent token's machine gets this label from you (pool=h100); repeatable",
    )
    revoke = _add(actions, "revoke", "admin.token_revoke", "revoke a token", common)
    revoke.add_argument("id", type=int)
