"""Fixtures: a served coordinator with the console, and one headless Chromium for every browser
test (each test gets a fresh context: its own storage, its own page).

The console's async tests and fixtures share the session's event loop, so the browser, started
once, serves them all."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from pytest_asyncio import is_async_test

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
HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every async test of this folder runs in the session's loop, where the browser lives."""
    session_loop = pytest.mark.asyncio(loop_scope="session")
    for item in items:
        if is_async_test(item) and HERE in Path(str(item.path)).parents:
            item.add_marker(session_loop, append=False)


@pytest_asyncio.fixture(loop_scope="session")
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


PAGE_WAIT_MS = 15_000
"""How long a page action or an `expect` waits for the console before the test fails: only a
hang reaches it."""


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def browser() -> AsyncIterator[Any]:
    """One headless Chromium (Debian's, driven by Playwright) for the whole session. Its
    `expect` waits as long as a page's own actions (`PAGE_WAIT_MS`): the default 5 s ran out on
    2 cores shared by four test workers."""
    executable = _chromium()
    from playwright.async_api import async_playwright, expect

    expect.set_options(timeout=PAGE_WAIT_MS)

    async with async_playwright() as driver:
        launched = await driver.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_ARGS
        )
        yield launched
        await launched.close()


@pytest_asyncio.fixture(loop_scope="session")
async def page(browser: Any) -> AsyncIterator[Any]:
    """A page in a fresh context of the shared browser; the test fails if the console's
    JavaScript raised an error it did not catch."""
    context = await browser.new_context(viewport={"width": 1280, "height": 1000})
    opened = await context.new_page()
    opened.set_default_timeout(PAGE_WAIT_MS)
    uncaught: list[str] = []
    opened.on("pageerror", lambda error: uncaught.append(str(error)))
    yield opened
    await context.close()
    assert uncaught == []


def screenshot_path(name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / f"{name}.png"
