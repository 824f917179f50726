"""Agents refused for their token are logged at the coordinator, at most one line a minute for
each kind and source address, with how many came since (issue 30)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from astraeus.coordinator.api import rejections
from astraeus.coordinator.api.rejections import Rejections
from astraeus.shared.clock import FakeClock

from .conftest import Cluster

REPORT = {"report": {"schema_version": "1.0", "name": "gpu-02", "cpu_cores": 1, "memory_bytes": 1}}


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == rejections.log.name]


def test_one_line_a_minute_per_kind_and_source(caplog: pytest.LogCaptureFixture) -> None:
    """An agent retrying every second: its first refusal is logged at once, the next ones are
    counted and told on the first line a minute later; another source or kind has its own."""
    clock = FakeClock(datetime(2026, 1, 1, tzinfo=UTC))
    seen = Rejections(clock)
    with caplog.at_level(logging.WARNING):
        for _ in range(30):
            seen.note("unknown token", "10.0.0.7", "for 'gpu-02'")
            seen.note("unknown token", "10.0.0.8", "for 'gpu-03'")
            clock.advance(1)
        seen.note("another machine's token", "10.0.0.7", "for 'gpu-02' with the token of x")
        clock.advance(30)
        seen.note("unknown token", "10.0.0.7", "for 'gpu-02'")
    assert _lines(caplog) == [
        "refused an agent's report from 10.0.0.7: unknown token (for 'gpu-02')",
        "refused an agent's report from 10.0.0.8: unknown token (for 'gpu-03')",
        "refused an agent's report from 10.0.0.7: another machine's token (for 'gpu-02' with "
        "the token of x)",
        "refused an agent's report from 10.0.0.7: unknown token (for 'gpu-02'); 29 more since "
        "the last such line",
    ]


def test_many_sources_stay_bounded(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the sources remembered at once, new ones share one line a minute."""
    monkeypatch.setattr(rejections, "MAX_SOURCES", 3)
    seen = Rejections(FakeClock(datetime(2026, 1, 1, tzinfo=UTC)))
    with caplog.at_level(logging.WARNING):
        for i in range(10):
            seen.note("unknown token", f"10.0.0.{i}", "for 'x'")
    assert len(seen.seen) == 4
    assert len(_lines(caplog)) == 4
    assert _lines(caplog)[-1].startswith("refused an agent's report from other addresses: ")


async def test_a_report_with_a_wrong_token_is_logged(
    fake_cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Over the API: an unknown token, then another machine's, each a line naming the kind,
    the source address and the machine; other routes' 401s are not agents' and not logged."""
    c = fake_cluster
    with caplog.at_level(logging.WARNING):
        status, _ = await c.call("PUT", "/api/v1/machines/gpu-02/report", "astr_wrong", REPORT)
        assert status == 401
        status, _ = await c.call("GET", "/api/v1/runs", "astr_wrong")
        assert status == 401
        token = c.agent_token("gpu-01")
        status, _ = await c.call("PUT", "/api/v1/machines/gpu-02/report", token, REPORT)
        assert status == 403
    assert _lines(caplog) == [
        "refused an agent's report from 127.0.0.1: unknown token (for 'gpu-02')",
        "refused an agent's report from 127.0.0.1: another machine's token (for 'gpu-02' with "
        "the token of machine 'gpu-01')",
    ]
