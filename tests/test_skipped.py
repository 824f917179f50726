"""The suite's last line names what it skipped and how to install what that needs."""

from __future__ import annotations

from skipped import reason_of, skipped_line

CHROMIUM = "Chromium is not installed: run .ci/console-deps (apt-get install chromium)"
ESLINT = "eslint is not installed: run .ci/console-deps (npm ci)"


def test_the_line_counts_skips_by_reason_most_first() -> None:
    """Each reason once, with how many tests it kept from running, the most common first."""
    reasons = [ESLINT] + [CHROMIUM] * 16
    assert skipped_line(reasons) == (f"Not run: 16 tests ({CHROMIUM}); 1 test ({ESLINT})")
    assert skipped_line([]) == ""


def test_a_reports_reason_is_read_from_pytests_tuple() -> None:
    """pytest keeps a skip as (path, line, "Skipped: reason"); the reason is what is shown."""
    assert reason_of(("tests/console/conftest.py", 53, f"Skipped: {CHROMIUM}")) == CHROMIUM
    assert reason_of("Skipped: no PostgreSQL server") == "no PostgreSQL server"
