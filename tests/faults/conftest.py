"""Fixtures for fault tests over real processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .rig import Cluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A started coordinator with a workspace; every process is stopped at the end."""
    made = Cluster(tmp_path)
    made.start()
    yield made
    made.stop()
