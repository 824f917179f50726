"""Fixtures for the runtime tests: a coordinator on loopback and a harness for agents."""

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the tests import their rig by name

from runtime_rig import Coordinator, Harness, kill_leftovers


@pytest.fixture
async def coordinator() -> AsyncIterator[Coordinator]:
    coord = Coordinator()
    await coord.start()
    yield coord
    if coord.runner is not None:
        await coord.down()


@pytest.fixture
async def harness(coordinator: Coordinator, tmp_path: Path) -> AsyncIterator[Harness]:
    async with aiohttp.ClientSession() as session:
        rig = Harness(coordinator, tmp_path / "state", session)
        yield rig
        await rig.halt()
        kill_leftovers(rig)
