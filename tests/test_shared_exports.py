"""`astraeus.shared` exports each name once: the `_EXPORTS` table, from which `__all__` and the
lazy lookup are made, and the `TYPE_CHECKING` imports mypy reads must name the same things."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import astraeus.shared as shared

ROOT = Path(__file__).resolve().parent.parent
INIT = ROOT / "shared" / "__init__.py"


def _tree() -> ast.Module:
    return ast.parse(INIT.read_text(), str(INIT))


def _type_checking_imports(tree: ast.Module) -> dict[str, str]:
    """Name → module of each import under `if TYPE_CHECKING:` (a module exported whole maps
    to itself); each must be written `X as X`, the form mypy counts as an export."""
    found: dict[str, str] = {}
    blocks = [
        node
        for node in tree.body
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
    ]
    assert len(blocks) == 1, "one `if TYPE_CHECKING:` block"
    for statement in blocks[0].body:
        assert isinstance(statement, ast.ImportFrom), ast.unparse(statement)
        assert statement.level == 1, ast.unparse(statement)
        for alias in statement.names:
            assert alias.asname == alias.name, f"write `{alias.name} as {alias.name}`"
            assert alias.name not in found, f"{alias.name} imported twice"
            found[alias.name] = statement.module or alias.name
    return found


def _literal(tree: ast.Module, name: str) -> object:
    """The literal value assigned to the module-level `name`."""
    target: ast.expr
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id == name:
            if isinstance(value, ast.Dict):  # literal_eval would keep the last of a repeated key
                keys = [ast.literal_eval(key) for key in value.keys if key is not None]
                assert len(keys) == len(set(keys)), f"a key repeated in {name}"
            return ast.literal_eval(value)
    raise AssertionError(f"no {name} in {INIT}")


def test_the_table_and_the_type_checking_imports_agree() -> None:
    """Every name of `_EXPORTS` is imported for mypy from the same module, and no other."""
    tree = _tree()
    table = _literal(tree, "_EXPORTS")
    submodules = _literal(tree, "_SUBMODULES")
    assert isinstance(table, dict)
    assert isinstance(submodules, tuple)
    homes = [(name, module) for module, names in table.items() for name in names]
    assert len({name for name, _ in homes}) == len(homes), "a name listed twice in _EXPORTS"
    expected = {**dict(homes), **{module: module for module in submodules}}
    assert _type_checking_imports(tree) == expected


def test_all_is_the_table() -> None:
    """`__all__` holds every exported name once, each of which resolves from its module."""
    assert len(shared.__all__) == len(set(shared.__all__))
    assert set(shared.__all__) == set(_type_checking_imports(_tree()))
    for name in shared.__all__:
        value = getattr(shared, name)
        if name in shared._SUBMODULES:
            assert value is importlib.import_module(f"astraeus.shared.{name}")
        else:
            module = importlib.import_module(f"astraeus.shared.{shared._HOME[name]}")
            assert value is getattr(module, name)


def test_an_unknown_name_is_an_attribute_error() -> None:
    """A name outside the table is refused as Python refuses any missing attribute."""
    with pytest.raises(AttributeError, match="has no attribute 'NotAModel'"):
        shared.NotAModel  # noqa: B018


def test_importing_the_package_loads_no_model() -> None:
    """`import astraeus.shared` and one name from it load that name's module only (PEP 562)."""
    code = (
        "import sys, astraeus.shared as s\n"
        "before = sorted(m for m in sys.modules if m.startswith('astraeus.shared.'))\n"
        "s.Vendor\n"
        "after = sorted(m for m in sys.modules if m.startswith('astraeus.shared.'))\n"
        "print(before, after, 'pydantic' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[] ['astraeus.shared.choices'] False"
