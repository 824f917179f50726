"""A pass's decisions cross from the pass worker to the service as the rows the store writes:
strings and numbers, each distinct explanation serialised once."""

from __future__ import annotations

import json
import pickle
from datetime import timedelta

from astraeus.coordinator.scheduler.compute import PassInputs
from astraeus.coordinator.scheduler.pass_worker import worker_pass
from astraeus.coordinator.store.commit import PlacementRow

from .conftest import Cluster
from .fakes import START

DOWN_AFTER = timedelta(seconds=30)


async def test_decisions_come_back_as_rows_with_one_text_per_explanation(
    cluster: Cluster,
) -> None:
    """Of a pass placing one run and leaving three alike waiting, the placement is a row with
    its shape and landing already JSON, the three waiting rows share one explanation row, and
    the pickled pass holds that explanation's text once."""
    c = cluster
    await c.workspace("vision")
    await c.report("gpu-01")
    await c.submit("vision", "fits", gpus=2)
    for name in ("big-a", "big-b", "big-c"):
        await c.submit("vision", name, gpus=16)
    decided, _ = worker_pass(
        c.store.database.location, PassInputs(START, DOWN_AFTER, START, 500, 2.0)
    )
    [placed] = decided.placed
    assert isinstance(placed, PlacementRow)
    assert (placed.run, placed.element, placed.network) == ("fits", 0, "local")
    assert json.loads(placed.landing)["rung"] == "node"
    assert [(w.machine, len(w.gpu_ids)) for w in placed.workers] == [("gpu-01", 2)]
    waiting = {row.run: row for row in decided.waiting}
    assert sorted(waiting) == ["big-a", "big-b", "big-c"]
    explanation = waiting["big-a"].explanation
    assert explanation is not None
    assert all(row.explanation is explanation for row in waiting.values())
    sent = pickle.dumps(decided)
    assert sent.count(explanation.body.encode()[:200]) == 1
