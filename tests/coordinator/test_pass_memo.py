"""A scheduler pass with no change since the last one decides nothing again."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
from helpers import until_async
from pytest_aiohttp import AiohttpClient

from astraeus.coordinator.scheduler import worker_pool

from .conftest import Cluster, make_cluster


async def waiting_after_passes(c: Cluster) -> list[int]:
    return [(await c.run_pass()).waiting for _ in range(3)]


@pytest.mark.parametrize("pass_process", [True, False])
async def test_no_change_no_decisions_until_something_changes(
    aiohttp_client: AiohttpClient, tmp_path: Path, pass_process: bool
) -> None:
    """A run too big to fit is explained by the first two passes (the second sees it evaluated
    once), not by a third with nothing changed, and again once a machine reports: in the pass
    worker and in the service alike; its stored reason stays as written."""
    c = await make_cluster(aiohttp_client, tmp_path, pass_process=pass_process)
    try:
        member = await c.workspace("vision")
        await c.report("gpu-01")
        await c.submit("vision", "huge", gpus=16)
        assert await waiting_after_passes(c) == [1, 1, 0]
        _, run = await c.call("GET", "/api/v1/runs/huge", member)
        assert (
            run["reason"] == "the workspace's machines have 8 GPUs that match; the run asks for 16"
        )
        await c.report("gpu-02", gpus=4)
        assert await waiting_after_passes(c) == [1, 0, 0]
        _, run = await c.call("GET", "/api/v1/runs/huge", member)
        assert (
            run["reason"] == "the workspace's machines have 12 GPUs that match; the run asks for 16"
        )
    finally:
        c.store.close()


async def test_a_pass_worker_that_died_is_replaced_and_holds_stay(
    aiohttp_client: AiohttpClient, tmp_path: Path
) -> None:
    """When the pass worker process is killed, the next pass starts another, which reads the
    cluster from the file: the run placed before keeps its 8 GPUs (a second 8-GPU run waits),
    and once it ends the second run is placed."""
    c = await make_cluster(aiohttp_client, tmp_path, pass_process=True)
    try:
        await c.workspace("vision")
        await c.report("gpu-01")
        await c.submit("vision", "first", gpus=8)
        assert (await c.run_pass()).placed == 1
        for worker in multiprocessing.active_children():
            worker.kill()
            worker.join()
        await c.submit("vision", "second", gpus=8)
        result = await c.run_pass()
        assert (result.placed, result.waiting) == (0, 1)
        await c.report("gpu-01", [{"task": "first-0", "state": "Running"}])
        await c.report("gpu-01", [{"task": "first-0", "state": "Succeeded", "exit_code": 0}])
        assert (await c.run_pass()).placed == 1
    finally:
        c.store.close()


async def test_a_worker_started_ahead_serves_the_passes(
    aiohttp_client: AiohttpClient, tmp_path: Path
) -> None:
    """A pass worker started before the app (as the service starts it before loading its
    store) runs before any pass, and the passes are computed in that same process."""
    pool = worker_pool(start_now=True)
    [started] = await until_async("the pass worker to start", multiprocessing.active_children)
    c = await make_cluster(aiohttp_client, tmp_path, pass_process=True, pass_pool=pool)
    try:
        await c.workspace("vision")
        await c.report("gpu-01")
        await c.submit("vision", "first", gpus=8)
        assert (await c.run_pass()).placed == 1
        assert [child.pid for child in multiprocessing.active_children()] == [started.pid]
    finally:
        c.store.close()
