"""At a start the service builds the live state its dry runs read (`compute.warm`), before any
dry run or pass asks for it: the first dry run after a start costs what any other does."""

from __future__ import annotations

from pathlib import Path

from helpers import until

from astraeus.coordinator.api.keys import SCHEDULER

from .conftest import ClientFactory, make_cluster


async def test_the_live_state_is_built_at_start(
    aiohttp_client: ClientFactory, tmp_path: Path
) -> None:
    first = await make_cluster(aiohttp_client, tmp_path)
    for name in ("gpu-01", "gpu-02", "gpu-03"):
        await first.report(name)
    await first.client.close()
    first.store.close()
    # No pass for an hour and nothing asked of it: only the start can build the state.
    c = await make_cluster(
        aiohttp_client,
        tmp_path,
        scheduler=True,
        pass_process=False,
        pass_debounce_seconds=3600.0,
        pass_interval_seconds=3600.0,
    )
    try:
        live = c.client.app[SCHEDULER]._pass_state.live
        assert live is not None

        def built() -> list[str]:
            return [facts.name for facts in live.frame.facts]

        assert until("the live state built at start", built) == ["gpu-01", "gpu-02", "gpu-03"]
        assert live.frame.idle_gpus == [8, 8, 8]
        assert all(facts.up for facts in live.frame.facts)
        found = await c.call("POST", "/api/v1/runs?dry_run=1", await c.workspace("vision"),
                             {"name": "x", "command": ["x"],
                              "requested_resources": {"gpu_requests": {"count": 8}}})  # fmt: skip
        assert found[1]["would_start"] is True
        assert live.rebuilt == 0  # the dry run read the state the start built
    finally:
        c.store.close()
