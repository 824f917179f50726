"""A submission is placed by the next pass at once, not after the scheduler's debounce."""

from __future__ import annotations

from pathlib import Path

from helpers import until_async

from .conftest import ClientFactory, Cluster, make_cluster
from .fakes import FirstFitSession


async def _state(c: Cluster, name: str) -> str:
    status, run = await c.call("GET", f"/api/v1/runs/{name}", c.tokens["vision"])
    assert status == 200, run
    return str(run["state"])


async def test_a_submission_does_not_wait_for_the_debounce(
    aiohttp_client: ClientFactory, tmp_path: Path
) -> None:
    """With a debounce of a minute pending (a machine just reported), a run that fits is
    placed within seconds of its submission: the submission cuts the debounce short."""
    c = await make_cluster(
        aiohttp_client,
        tmp_path,
        FirstFitSession,
        scheduler=True,
        pass_process=False,
        pass_debounce_seconds=60.0,
        pass_interval_seconds=60.0,
    )
    try:
        await c.workspace("vision")
        await c.report("gpu-01")  # a new machine: a pass is asked for, after the debounce
        await c.submit("vision", "train", gpus=1)

        async def left_pending() -> bool:
            return await _state(c, "train") != "Pending"

        await until_async("the pass after the debounce to place train", left_pending)
        assert await _state(c, "train") == "Running"
    finally:
        c.store.close()
