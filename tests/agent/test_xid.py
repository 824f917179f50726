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
    *[pytest.param(x, XidClass.AT_RISK, id=f"nvlink5-{x}") for x in range(144, 151)],
]


@pytest.mark.parametrize(("xid", "kind"), CASES)
def test_xid_classes(xid: int, kind: XidClass) -> None:
    """Each Xid falls in its class: fatal, application (ignored) or at risk."""
    assert classify_xid(xid) == kind


def test_descriptions_name_known_xids() -> None:
    """Known Xids carry their meaning; others just their number."""
    assert describe_xid(79) == "Xid 79 (GPU has fallen off the bus)"
    assert describe_xid(153) == "Xid 153"


@pytest.mark.parametrize(
    ("xid", "text"),
    [
        (144, "Xid 144 (NVLink5 SAW error)"),
        (145, "Xid 145 (NVLink5 RLW error)"),
        (146, "Xid 146 (NVLink5 TLW error)"),
        (147, "Xid 147 (NVLink5 TREX error)"),
        (148, "Xid 148 (NVLink5 NVLPW_CTRL error)"),
        (149, "Xid 149 (NVLink5 NETIR error)"),
        (150, "Xid 150 (NVLink5 MSE error)"),
    ],
    ids=[str(x) for x in range(144, 151)],
)
def test_nvlink5_xids_are_decoded(xid: int, text: str) -> None:
    """Xids 144–150 name their NVLink5 unit, as the catalogue's mnemonics do."""
    assert describe_xid(xid) == text
