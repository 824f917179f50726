"""Tests that need PostgreSQL skip with a one-line reason where no server can start, and fail
instead under `ASTRAEUS_REQUIRE_POSTGRESQL=1` (what CI sets once it installed PostgreSQL)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

NEEDS_SERVER = """
def test_needs_a_server(postgresql_url):
    assert postgresql_url.startswith("postgresql://")
"""


def _run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    test = ROOT / "tests" / f"test_zz_needs_server_{os.getpid()}_{tmp_path.name}.py"
    test.write_text(NEEDS_SERVER)
    try:
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-rs", str(test)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, "ASTRAEUS_POSTGRESQL_BIN": str(tmp_path / "none"), **env},
            timeout=120,
            check=False,
        )
    finally:
        test.unlink()


def test_no_server_skips_with_the_reason(tmp_path: Path) -> None:
    found = _run(tmp_path, ASTRAEUS_REQUIRE_POSTGRESQL="")
    assert found.returncode == 0, found.stdout
    assert "1 skipped" in found.stdout
    assert "no PostgreSQL server: PostgreSQL's initdb is not installed" in found.stdout


def test_no_server_fails_where_it_is_required(tmp_path: Path) -> None:
    found = _run(tmp_path, ASTRAEUS_REQUIRE_POSTGRESQL="1")
    assert found.returncode == 1, found.stdout
    assert "ASTRAEUS_REQUIRE_POSTGRESQL=1 but no PostgreSQL server" in found.stdout
