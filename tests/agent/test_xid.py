"""Xid classification per the reference's table."""

import pytest

from astraeus.agent.health.xid import XidClass, classify_xid, describe_xid

CASES = [
    *[
        pytest.param(x, XidClass.FATAL, id=f"fatal-{x}")
        for x in (48, 64, 74, 79, 95, 119, 120, 140)
    ],
    *[pytest.param(x, XidClass.FATAL, id=f"reset-{x}") for x in (46, 62, 136, 143, 158)],
    *[pytest.param(x, XidClass.APPLICATION, id=f"app-{x}") for x in (13, 31, 43, 45, 68)],
    *[pytest.param(x, XidClass.AT_RISK, id=f"risk-{x}") for x in (54, 63, 92, 94, 109, 121, 999)],
]


@pytest.mark.parametrize(("xid", "kind"), CASES)
def test_xid_classes(xid: int, kind: XidClass) -> None:
    """Each Xid falls in its class: fatal, application (ignored) or at risk."""
    assert classify_xid(xid) == kind


def test_descriptions_name_known_xids() -> None:
    """Known Xids carry their meaning; others just their number."""
    assert describe_xid(79) == "Xid 79 (GPU has fallen off the bus)"
    assert describe_xid(157) == "Xid 157"
