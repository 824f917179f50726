"""The console's JavaScript: `node --test` on its pure functions, and eslint on all of it.

Both need Node.js; eslint also needs `npm ci` (both done by `.ci/console-deps`). Without them the
tests skip and say what to install."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from astraeus.shared.reasons import ReasonKind, RejectionCode

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


def test_console_reads_the_kinds_and_codes_the_api_sends() -> None:
    """why.js's queue kinds are exactly the API's queue `reason_kind`s, and each code its fixes
    are keyed by is a `RejectionCode` the engine sends: the console reads data, not words."""
    script = (
        'import { FIXES, QUEUE_KINDS } from "./coordinator/console/why.js";'
        "console.log(JSON.stringify({queue: [...QUEUE_KINDS], fixes: Object.keys(FIXES)}));"
    )
    result = subprocess.run(
        [node(), "--input-type=module", "-e", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    read = json.loads(result.stdout)
    assert set(read["queue"]) == {kind.value for kind in ReasonKind if kind.is_queue}
    assert set(read["fixes"]) <= {code.value for code in RejectionCode}
    assert len(read["fixes"]) == 10
