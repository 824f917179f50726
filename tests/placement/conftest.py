"""Every placement test doubles as a check that each filter reads only what its `READS`
declares: the engine's filters run through `cache.reads.guarded` here, so a filter reading
more fails the test that reached it, naming the filter and what it read."""

import pytest

from astraeus.coordinator.placement import evaluation
from astraeus.coordinator.placement.cache import prepared, reads


@pytest.fixture(autouse=True)
def filters_read_only_what_they_declare(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(evaluation, "first_rejection", reads.guarded_first_rejection)
    monkeypatch.setattr(prepared, "first_rejection", reads.guarded_first_rejection)
