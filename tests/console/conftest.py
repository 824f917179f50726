"""Fixtures: a served coordinator with the console, and a headless Chromium when one is here."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from .cluster import Cluster, start, stop

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "console"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    """A coordinator with the console on 127.0.0.1, a workspace `vision` and its member."""
    made, store = await start(tmp_path)
    yield made
    await stop(made, store)


def _chromium() -> str:
    """Debian's Chromium, or why the browser tests cannot run; skips the test when absent."""
    executable = str(CHROMIUM) if CHROMIUM.exists() else shutil.which("chromium")
    if executable is None:
        pytest.skip("Chromium is not installed: run .ci/console-deps (apt-get install chromium)")
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        pytest.skip("the playwright Python package is not installed: run .ci/console-deps")
    return executable


@pytest.fixture
async def page(tmp_path: Path) -> AsyncIterator[Any]:
    """A page in a fresh headless Chromium (Debian's, driven by Playwright); the test fails if
    the console's JavaScript raised an error it did not catch."""
    executable = _chromium()
    from playwright.async_api import async_playwright

    profile = tmp_path / "chromium-profile"
    async with async_playwright() as driver:
        context = await driver.chromium.launch_persistent_context(
            str(profile),
            executable_path=executable,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 1000},
        )
        opened = context.pages[0] if context.pages else await context.new_page()
        opened.set_default_timeout(15_000)
        uncaught: list[str] = []
        opened.on("pageerror", lambda error: uncaught.append(str(error)))
        yield opened
        await context.close()
    assert uncaught == []


def screenshot_path(name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / f"{name}.png"
