"""The one line the suite ends with when it skipped tests: what was skipped, why, and the command
that installs what they need (each skip's reason names it, as `.ci/console-deps` for the
console's browser tests and eslint). `tests/conftest.py` prints it; the README's command would
otherwise end with a bare "16 skipped" (pytest's `-ra` lines scroll past with the rest)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

PREFIX = "Skipped: "


def reason_of(longrepr: object) -> str:
    """A skip report's reason: pytest keeps it as (path, line, "Skipped: reason")."""
    three = isinstance(longrepr, tuple) and len(longrepr) == 3
    text = str(longrepr[2]) if isinstance(longrepr, tuple) and three else str(longrepr)
    return text.removeprefix(PREFIX).strip()


def skipped_line(reasons: Iterable[str]) -> str:
    """`Not run: 16 tests (Chromium is not installed: run .ci/console-deps …); 2 tests (…)`, most
    first; empty when nothing was skipped."""
    counted = Counter(reasons)
    if not counted:
        return ""
    parts = [
        f"{n} {'test' if n == 1 else 'tests'} ({reason})"
        for reason, n in sorted(counted.items(), key=lambda item: (-item[1], item[0]))
    ]
    return "Not run: " + "; ".join(parts)
