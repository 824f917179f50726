"""The agent's drives: configured local and network drives, read with statvfs at each scan,
unreachable when their folder is gone or statvfs hangs; fake machines describe drives too."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from astraeus.agent.drives import DriveConfig, DriveReader
from astraeus.agent.fake import FakeMachineError, load_fake_machine
from astraeus.agent.host import DiskStats, statvfs_disk
from astraeus.agent.inventory import Scanner
from astraeus.shared import DriveInfo
from astraeus.shared.clock import FakeClock

GIB = 1024**3


def test_a_configured_drive_reports_statvfs_figures(tmp_path: Path) -> None:
    """A local drive's capacity and free space are what statvfs says about its folder."""
    folder = tmp_path / "datasets"
    folder.mkdir()
    reader = DriveReader([DriveConfig("datasets", folder)])
    (found,) = reader.read()
    stats = os.statvfs(folder)
    assert found.model_dump(exclude={"free_bytes"}) == {
        "name": "datasets",
        "path": str(folder),
        "capacity_bytes": stats.f_blocks * stats.f_frsize,
        "local": True,
        "reachable": True,
    }
    assert found.free_bytes > 0
    assert reader.problems == []


def test_a_missing_folder_is_unreachable_and_says_why(tmp_path: Path) -> None:
    """A network drive whose mount point is gone is reported, unreachable, with the reason."""
    reader = DriveReader([DriveConfig("shared", tmp_path / "nfs", local=False)])
    assert reader.read() == [
        DriveInfo(name="shared", path=str(tmp_path / "nfs"), local=False, reachable=False)
    ]
    assert reader.problems == [
        f"network drive shared at {tmp_path / 'nfs'} is not reachable: no such directory"
    ]


def test_a_hung_mount_is_unreachable_until_it_answers(tmp_path: Path) -> None:
    """statvfs that does not answer in time makes the drive unreachable without blocking the
    scan; a later scan does not pile up another probe, and once it answers the drive is back."""
    release, calls = threading.Event(), []

    def hung(path: Path) -> DiskStats:
        calls.append(path)
        release.wait(10)
        return statvfs_disk(path)

    reader = DriveReader([DriveConfig("shared", tmp_path, local=False)], stat=hung, timeout=0.05)
    assert [drive.reachable for drive in reader.read()] == [False]
    assert reader.problems == [
        f"network drive shared at {tmp_path} is not reachable: no answer in 0.05 s"
    ]
    assert [drive.reachable for drive in reader.read()] == [False]
    assert reader.problems == [
        f"network drive shared at {tmp_path} is not reachable: "
        "statvfs has not answered for 0.05 s or more"
    ]
    assert len(calls) == 1
    release.set()
    assert [drive.reachable for drive in reader.read()] == [True]
    assert len(calls) == 1


DRIVES = """
name = "box"
cores = 8
memory_gb = 64

[drives.datasets]
capacity_gb = 2000
free_gb = 1500

[drives.shared]
network = true
"""


def test_a_fake_machine_describes_its_drives(tmp_path: Path, clock: FakeClock) -> None:
    """Drives in a fake machine's file are folders in its tree, reported with the file's
    figures; a lost network drive turns unreachable at the next scan."""
    spec = tmp_path / "box.toml"
    spec.write_text(DRIVES)
    machine = load_fake_machine(str(spec))
    scanner = Scanner(name="", backend=machine, data_dir=tmp_path / "data", clock=clock)
    root = tmp_path / "data/fake/box/drives"
    assert scanner.scan().drives == [
        DriveInfo(
            name="datasets",
            path=str(root / "datasets"),
            capacity_bytes=2000 * GIB,
            free_bytes=1500 * GIB,
        ),
        DriveInfo(
            name="shared",
            path=str(root / "shared"),
            capacity_bytes=1000 * GIB,
            free_bytes=500 * GIB,
            local=False,
        ),
    ]
    assert (root / "datasets").is_dir()
    machine.lose_drive("shared")
    report = scanner.scan()
    assert [(drive.name, drive.reachable) for drive in report.drives] == [
        ("datasets", True),
        ("shared", False),
    ]
    assert scanner.warnings[-1] == (
        f"network drive shared at {root / 'shared'} is not reachable: "
        "Transport endpoint is not connected"
    )


def test_configured_and_fake_drives_are_reported_together(tmp_path: Path, clock: FakeClock) -> None:
    """A drive from the agent's configuration is read with the real statvfs beside the fake
    machine's own."""
    spec = tmp_path / "box.toml"
    spec.write_text(DRIVES)
    real = tmp_path / "scratch"
    real.mkdir()
    scanner = Scanner(
        name="",
        backend=load_fake_machine(str(spec)),
        data_dir=tmp_path / "data",
        clock=clock,
        drives=[DriveConfig("scratch", real)],
    )
    assert [drive.name for drive in scanner.scan().drives] == ["scratch", "datasets", "shared"]


@pytest.mark.parametrize(
    ("drive", "problem"),
    [
        pytest.param('[drives."a/b"]', "drives.a/b: use letters, digits", id="slash-in-name"),
        pytest.param(
            "[drives.d]\ncapacity_gb = 1\nfree_gb = 2", "free_gb (2.0) is more", id="free-too-big"
        ),
    ],
)
def test_bad_fake_drives_name_the_problem(tmp_path: Path, drive: str, problem: str) -> None:
    """A fake drive with a bad name or figures is refused, naming it."""
    spec = tmp_path / "box.toml"
    spec.write_text('name = "box"\ncores = 8\nmemory_gb = 64\n' + drive + "\n")
    with pytest.raises(FakeMachineError) as raised:
        load_fake_machine(str(spec))
    assert problem in str(raised.value)
