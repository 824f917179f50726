"""The order of the suite under pytest-xdist (modules holding a slow test go first), the
PostgreSQL server the store's tests run on besides SQLite, and the last line of a run: what it
skipped and what to install for it."""

import os
from collections.abc import Iterator
from pathlib import Path

import pg_server
import pytest
from skipped import reason_of, skipped_line


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under `pytest -n ... --dist loadscope --no-loadscope-reorder` (the README's command) each
    module runs whole on one worker, in the order collected here. Modules holding a `slow` test
    go first, each still whole and in its own order, so the long ones (the release build
    above all) start at once and the hundreds of short modules fill in around them, instead of
    one long module starting last while the other workers sit idle. A run in one process
    (no xdist) keeps the plain order."""
    if not hasattr(config, "workerinput"):  # only an xdist worker has it
        return
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow)  # stable: the rest keep their order


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> Iterator[None]:
    """One line, after pytest's short summary and just before its count, naming what was
    skipped and why, each reason with the command that installs what it needs: the console's
    browser tests and eslint skip without Chromium, Playwright and Node.js
    (`.ci/console-deps`), which `[dev]` does not install (docs/development.md)."""
    yield  # pytest's own summary first (a wrapper tried first ends last)
    skipped = terminalreporter.stats.get("skipped", [])
    line = skipped_line(reason_of(report.longrepr) for report in skipped)
    if line:
        terminalreporter.write_line(line, yellow=True, bold=True)


REQUIRE_POSTGRESQL = "ASTRAEUS_REQUIRE_POSTGRESQL"
"""Set to 1 (CI's `.ci/run` does, where it installed PostgreSQL): tests that need a server fail
instead of skipping when none starts."""


@pytest.fixture(scope="session")
def postgresql_server() -> Iterator[pg_server.Server]:
    """One private PostgreSQL server for this test process (`tests/pg_server.py`); where none
    can start, the tests that need it skip with the reason (fail under `REQUIRE_POSTGRESQL`)."""
    started = pg_server.start()
    if isinstance(started, str):
        if os.environ.get(REQUIRE_POSTGRESQL) == "1":
            pytest.fail(f"{REQUIRE_POSTGRESQL}=1 but no PostgreSQL server: {started}")
        pytest.skip(f"no PostgreSQL server: {started}")
    yield started
    started.stop()


@pytest.fixture
def postgresql_url(postgresql_server: pg_server.Server) -> str:
    """A fresh, empty database on the session's server."""
    return postgresql_server.create_database()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_location(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """Where a store test keeps its state, once per engine: a SQLite file, or a fresh
    PostgreSQL database (its URL). The store's own tests take it, so each runs on both."""
    if request.param == "sqlite":
        return tmp_path / "astraeus.db"
    return str(request.getfixturevalue("postgresql_url"))
