"""A shared cluster on loopback: a real coordinator and real agents over fake machines."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from .rig import Cluster


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    made = Cluster(tmp_path)
    await made.start()
    yield made
    await made.close()
