"""The systemd units are valid unit files, checked by systemd-analyze where it exists."""

import configparser
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
UNITS = sorted((ROOT / "systemd").glob("*.service"))
BIN = Path(sys.executable).parent


def _unit(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(path)
    return parser


@pytest.mark.parametrize("unit", UNITS, ids=[u.name for u in UNITS])
def test_unit_is_notify_with_watchdog_and_restart(unit: Path) -> None:
    """Each unit is Type=notify with a watchdog, restarts on failure and has a state directory."""
    service = _unit(unit)["Service"]
    assert service["Type"] == "notify"
    assert service["NotifyAccess"] == "main"
    assert int(service["WatchdogSec"]) > 0
    assert service["Restart"] == "on-failure"
    assert service["StateDirectory"].startswith("astraeus")


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not here")
@pytest.mark.parametrize("unit", UNITS, ids=[u.name for u in UNITS])
def test_systemd_analyze_verify(unit: Path, tmp_path: Path) -> None:
    """systemd-analyze verify accepts the unit, with /opt/astraeus/bin pointed at this venv."""
    text = unit.read_text().replace("/opt/astraeus/bin/", f"{BIN}/")
    copy = tmp_path / unit.name
    copy.write_text(text)
    out = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(copy)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr.strip() == ""
