"""`astra astraeus`'s commands come from one table: the shortcut verbs, the subcommands and the
functions they run cannot drift apart."""

from __future__ import annotations

import argparse
import importlib

import pytest

from astraeus.coordinator.cli import main
from astraeus.coordinator.cli.parser import (
    COMMANDS,
    VERBS,
    Verb,
    build,
    command_modules,
    terminal_columns,
)


def _leaves(
    verbs: tuple[Verb, ...], path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], Verb]]:
    found = []
    for verb in verbs:
        here = (*path, verb.name)
        found += _leaves(verb.actions, here) if verb.actions else [(here, verb)]
    return found


LEAVES = _leaves(COMMANDS)


def test_the_verbs_are_the_table_once_each() -> None:
    assert tuple(verb.name for verb in COMMANDS) == VERBS
    assert len(set(VERBS)) == len(VERBS)


def _sub(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parser's subcommands by name, in the order they were added (none: {})."""
    found = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(next(found).choices) if parser._subparsers else {}


def test_astraeus_has_a_subcommand_per_verb_in_table_order() -> None:
    """The parser's `astraeus` subcommands, and each verb's actions, are the table's."""
    astraeus = _sub(build())["astraeus"]
    assert list(_sub(astraeus)) == list(VERBS)
    for verb in COMMANDS:
        assert list(_sub(_sub(astraeus)[verb.name])) == [a.name for a in verb.actions]


@pytest.mark.parametrize(("path", "verb"), LEAVES, ids=[" ".join(p) for p, _ in LEAVES])
def test_each_command_names_a_function_that_exists(path: tuple[str, ...], verb: Verb) -> None:
    """`module.function` of every command imports and is callable, so no command fails only
    when a user first runs it."""
    module, name = verb.where.split(".")
    found = getattr(importlib.import_module(f"astraeus.coordinator.cli.{module}"), name)
    assert callable(found)


def test_a_verb_alone_is_short_for_astraeus_verb(capsys: pytest.CaptureFixture[str]) -> None:
    """`astra workspaces --help` is `astra astraeus workspaces --help`; an unknown verb is
    refused in two lines."""
    assert main(["workspaces", "--help"]) == 0
    assert "list workspaces (admin)" in capsys.readouterr().out
    assert main(["frobnicate"]) == 2
    assert capsys.readouterr().err == (
        "astra: unknown command 'frobnicate'\nRun 'astra --help' to see what it takes.\n"
    )


def test_the_release_bundles_every_command_module_once() -> None:
    """The modules the release names to PyInstaller are those the commands run from."""
    modules = command_modules()
    assert len(modules) == len(set(modules))
    assert set(modules) == {f"astraeus.coordinator.cli.{v.where.split('.')[0]}" for _, v in LEAVES}


def _helps(parser: argparse.ArgumentParser) -> list[str]:
    """The parser's help and usage, and its subcommands', depth first."""
    found = [parser.format_help(), parser.format_usage()]
    for sub in _sub(parser).values():
        found += _helps(sub)
    return found


@pytest.mark.parametrize("verb", VERBS)
def test_a_command_built_alone_parses_and_helps_as_in_the_whole(verb: str) -> None:
    """`astra status x` builds only `status`'s parser: its help, usage (as a usage error
    prints it) and actions are those of the whole command line's."""
    whole = _sub(_sub(build())["astraeus"])[verb]
    alone = _sub(_sub(build(verb))["astraeus"])
    assert list(alone) == [verb]
    assert _helps(alone[verb]) == _helps(whole)


def test_a_usage_error_reads_the_same_with_one_command_built(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`astra astraeus status` without its name: argparse's one line and the hint, as before."""
    assert main(["astraeus", "status"]) == 2
    assert capsys.readouterr().err == (
        "astra: the following arguments are required: name\n"
        "Run 'astra astraeus status --help' to see what it takes.\n"
    )


@pytest.mark.parametrize("columns", ["", "50", "200", "0", "wide"])
def test_help_is_as_wide_as_argparse_makes_it(
    columns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The width `astra` gives argparse's formatter is the one argparse finds with `shutil`
    (`COLUMNS`, else the terminal's, else 80), which `astra` does not import."""
    import shutil

    monkeypatch.setenv("COLUMNS", columns)
    assert terminal_columns() == shutil.get_terminal_size().columns
