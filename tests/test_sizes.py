"""Sizes read as people write them (`88.8 TiB`), in the engine's drive reason and the agent's
`inspect`, never as `9.31323e+07 GiB`."""

from datetime import UTC, datetime

import pytest

from astraeus.coordinator.placement import Pending, place
from astraeus.coordinator.testing.fake_cluster import machine, run, snapshot
from astraeus.shared import DriveInfo
from astraeus.shared.sizes import size_text

NOW = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
GIB, TIB = 1024**3, 1024**4


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (512 * 1024**2, "512 MiB"),
        (3 * GIB // 2, "1.5 GiB"),
        (500 * GIB, "500 GiB"),
        (TIB - 1, "1 TiB"),
        (int(88.8 * TIB), "88.8 TiB"),
        (2**63 - 1, "8 EiB"),
    ],
)
def test_size_text(value: int, text: str) -> None:
    """The largest unit the value reaches, one decimal at most, whole numbers whole."""
    assert size_text(value) == text


def test_negative_size_is_refused() -> None:
    with pytest.raises(ValueError, match="a size is not negative: -1"):
        size_text(-1)


@pytest.mark.parametrize(
    ("size", "reason"),
    [
        (100 * 10**12, "drives need 90.9 TiB at the data location, 12 TiB free"),
        (100 * 10**15, "drives need 88.8 PiB at the data location, 12 TiB free"),
    ],
)
def test_a_large_drive_reason_reads_in_a_human_unit(size: int, reason: str) -> None:
    """A 100 TB (or 100 PB) drive on a machine with 12 TiB free at its data location: the
    reason says `90.9 TiB` (`88.8 PiB`), not `93132.3 GiB` (`9.31323e+07 GiB`)."""
    drive = {"name": "datasets", "mount_path": "/data", "size_bytes": size}
    host = machine("m", drives=[DriveInfo(name="datasets", local=False)], data_free_gib=12 * 1024)
    result = place(run(ask={"gpu_requests": {"count": 1}, "drives": [drive]}), snapshot(host), NOW)
    assert isinstance(result, Pending)
    assert result.explanation.nodes[0].reasons == [reason]


def test_inspect_lists_drives_in_a_human_unit() -> None:
    """`inspect`'s table lists the drives with their size and free space as `88.8 PiB`."""
    from astraeus.agent.table import render
    from astraeus.shared import SCHEMA_VERSION, MachineReport

    drives = [
        DriveInfo(name="datasets", path="/mnt/lake", capacity_bytes=100 * 10**15,
                  free_bytes=int(12.5 * TIB), local=False),
        DriveInfo(name="scratch", path="/scratch", capacity_bytes=3 * TIB, free_bytes=GIB // 2),
        DriveInfo(name="archive", path="/mnt/archive", local=False, reachable=False),
    ]  # fmt: skip
    report = MachineReport(
        schema_version=SCHEMA_VERSION, name="m", hostname="m", agent_version="0", cpu_cores=8,
        memory_bytes=64 * GIB, data_free_bytes=100 * 10**15, drives=drives,
    )  # fmt: skip
    lines = render(report).splitlines()
    assert "88.8 PiB free at the data directory" in lines[1]
    assert (
        "Drives: datasets /mnt/lake (network, 88.8 PiB, 12.5 TiB free), scratch /scratch "
        "(3 TiB, 512 MiB free), archive /mnt/archive (network, not reachable)"
    ) in lines
