"""docs/api-reference.md is generated from the OpenAPI document and kept up to date."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "api_reference", ROOT / "scripts/api_reference.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_api_reference_is_up_to_date() -> None:
    """The committed reference equals what the script writes from today's OpenAPI document."""
    script = _script()
    committed = (ROOT / "docs/api-reference.md").read_text()
    assert committed == script.render(script.openapi()), (
        "docs/api-reference.md is out of date: run .venv/bin/python scripts/api_reference.py "
        "and commit the file"
    )


def test_api_reference_lists_every_route_and_schema() -> None:
    """Each route has its own section naming who may call it, and each schema its own."""
    script = _script()
    doc = script.openapi()
    text = script.render(doc)
    for path, item in doc["paths"].items():
        for method, op in item.items():
            who = op["description"].removeprefix("Who may call it: ")
            assert f"### {method.upper()} {path}\n\n{op['summary']}. Who may call it: {who}" in text
    for name in doc["components"]["schemas"]:
        assert f"\n### {name}\n" in text


def test_check_mode_names_the_command_when_out_of_date(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--check` exits 1 on a stale file and tells how to regenerate it; 0 once written."""
    script = _script()
    stale = tmp_path / "api-reference.md"
    stale.write_text("# old\n")
    assert script.main(["--check", "--output", str(stale)]) == 1
    assert capsys.readouterr().err == (
        f"{stale} is out of date: run .venv/bin/python scripts/api_reference.py\n"
    )
    assert script.main(["--output", str(stale)]) == 0
    assert script.main(["--check", "--output", str(stale)]) == 0
