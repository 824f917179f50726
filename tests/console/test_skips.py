"""Without Chromium or Playwright the browser tests skip, and say what to install."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from . import conftest


def test_skips_naming_chromium_when_it_is_absent(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No /usr/bin/chromium and none on PATH: the skip says to run .ci/console-deps."""
    monkeypatch.setattr(conftest, "CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(pytest.skip.Exception) as skipped:
        conftest._chromium()
    assert str(skipped.value) == (
        "Chromium is not installed: run .ci/console-deps (apt-get install chromium)"
    )


def test_skips_naming_playwright_when_it_is_absent(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Chromium present but no Playwright package: the skip says to run .ci/console-deps."""
    fake = tmp_path / "chromium"
    fake.write_text("#!/bin/sh\n")
    monkeypatch.setattr(conftest, "CHROMIUM", fake)
    # A None entry makes `import playwright.async_api` fail as if it were not installed.
    monkeypatch.setitem(sys.modules, "playwright.async_api", None)
    with pytest.raises(pytest.skip.Exception) as skipped:
        conftest._chromium()
    assert str(skipped.value) == (
        "the playwright Python package is not installed: run .ci/console-deps"
    )
