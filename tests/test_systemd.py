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


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not here")
def test_worker_unit_properties_parse(tmp_path: Path) -> None:
    """Every --property= the agent gives a worker's transient unit (limits, DevicePolicy=closed,
    each DeviceAllow=) is a directive systemd-analyze verify parses without complaint."""
    from astraeus.agent.runtime.launch import systemd_run_command
    from astraeus.shared import Assignment

    task = Assignment.model_validate(
        {"task": "t-0", "run": "t", "workspace": "w", "index": 0, "command": ["x"],
         "cpu_cores": 12.5, "memory_bytes": 2**36,
         "rendezvous": {"master_addr": "127.0.0.1", "master_port": 29500, "world_size": 1,
                        "rank": 0, "node_rank": 0, "local_world_size": 1}}
    )  # fmt: skip
    devices = ("/dev/nvidia3", "/dev/nvidiactl", "/dev/infiniband", "/dev/dri/renderD128")
    command = systemd_run_command("astraeus-w-t-0", task, ["/bin/true"], devices)
    properties = [arg.removeprefix("--property=") for arg in command if arg.startswith("--prop")]
    unit = tmp_path / "astraeus-w-t-0.service"
    unit.write_text("[Service]\nExecStart=/bin/true\n" + "\n".join(properties) + "\n")
    out = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(unit)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (out.returncode, out.stderr.strip()) == (0, "")
    assert "DevicePolicy=closed" in properties
