"""The console's JavaScript: `node --test` on its pure functions, and eslint on all of it.

Both need Node.js; eslint also needs `npm ci` (both done by `.ci/console-deps`). Without them the
tests skip and say what to install."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ESLINT = ROOT / "node_modules" / "eslint" / "bin" / "eslint.js"


def node() -> str:
    """Node.js, or a skip that says how to install it."""
    found = shutil.which("node")
    if found is None:
        pytest.skip("Node.js is not installed: run .ci/console-deps (apt-get install nodejs npm)")
    return found


def test_pure_functions_pass_node_test() -> None:
    """`node --test tests/console/js/` passes: formatting, words for people, reason grouping,
    New run's sites, the map's layout and hit tests, the table's sort and filters."""
    result = subprocess.run(
        [node(), "--test", "--test-reporter=tap", "tests/console/js/"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "\n# fail 0\n" in result.stdout
    assert "\n# pass 0\n" not in result.stdout


def test_eslint_finds_nothing() -> None:
    """eslint (eslint.config.js: the recommended rules and ours) finds nothing in the console's
    modules or their tests."""
    runtime = node()
    if not ESLINT.exists():
        pytest.skip("eslint is not installed: run .ci/console-deps (npm ci)")
    result = subprocess.run(
        [runtime, str(ESLINT), "--max-warnings=0", "coordinator/console", "tests/console/js"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
