"""Known GPUs are kept per backend, `inspect` never writes the agent's data directory, and the
flat file of an older agent is still read."""

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from astraeus.agent.cli import main
from astraeus.agent.fake import FakeMachine
from astraeus.agent.inventory import Scanner
from astraeus.shared.clock import FakeClock

Factory = Callable[[str], FakeMachine]


def _intel_card(sys_root: Path, bdf: str = "0000:03:00.0") -> Path:
    """One Intel GPU (xe) in a DRM sysfs tree."""
    dev = sys_root / "devices/pci0000:00" / bdf
    dev.mkdir(parents=True)
    (dev / "vendor").write_text("0x8086\n")
    (dev / "device").write_text("0x0bd5\n")
    drivers = sys_root / "bus/pci/drivers/xe"
    drivers.mkdir(parents=True, exist_ok=True)
    (dev / "driver").symlink_to(os.path.relpath(drivers, dev))
    card = sys_root / "class/drm/card0"
    card.mkdir(parents=True)
    (card / "device").symlink_to(os.path.relpath(dev, card))
    return sys_root


def _files(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under `root` with its bytes and modification time."""
    return {
        str(path.relative_to(root)): (path.read_bytes(), path.stat().st_mtime_ns)
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def _health(scanner: Scanner) -> list[tuple[str, str]]:
    return [(g.model, g.health.state.value) for g in scanner.scan().gpus]


def test_inspect_of_another_backend_writes_nothing_and_faults_nothing(
    machine_factory: Factory, tmp_path: Path, clock: FakeClock
) -> None:
    """The agent knows its 4 L40S; `inspect --backend intel` on the same data directory sees
    the Intel GPU, writes no file there, and the agent then reports no GPU missing."""
    data = tmp_path / "data"
    machine = machine_factory("l40s-pcie")
    agent = Scanner(name="", backend=machine, data_dir=data, clock=clock)
    assert _health(agent) == [("NVIDIA L40S", "healthy")] * 4
    before = _files(data)
    sysfs = _intel_card(tmp_path / "intel-sys")
    argv = ["inspect", "--backend", "intel", "--sysfs-root", str(sysfs), "--data-dir", str(data)]
    assert main([*argv, "--json"]) == 0
    assert _files(data) == before
    restarted = Scanner(name="", backend=machine, data_dir=data, clock=clock)
    assert _health(restarted) == [("NVIDIA L40S", "healthy")] * 4


def test_inspect_writes_nothing_even_into_an_empty_data_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fake machine's tree goes to a temporary directory, removed afterwards; the data
    directory is not even created."""
    data = tmp_path / "data"
    assert main(["inspect", "--backend", "fake:l40s-pcie", "--data-dir", str(data)]) == 0
    assert "GPUs: 4 (fake:" in capsys.readouterr().out
    assert not data.exists()


def test_gpus_are_remembered_per_backend(
    machine_factory: Factory, tmp_path: Path, clock: FakeClock
) -> None:
    """An agent run under `intel` once, then under its own backend again: neither backend
    expects the other's GPUs, and each still notices its own GPU gone."""
    data = tmp_path / "data"
    machine = machine_factory("l40s-pcie")
    Scanner(name="", backend=machine, data_dir=data, clock=clock).scan()
    sysfs = _intel_card(tmp_path / "intel-sys")
    intel = Scanner(name="n", backend="intel", sysfs_root=sysfs, data_dir=data, clock=clock)
    assert _health(intel) == [("Intel GPU 0x0bd5", "healthy")]
    machine.remove_gpu(3)
    nvidia = Scanner(name="", backend=machine, data_dir=data, clock=clock)
    assert _health(nvidia) == [("NVIDIA L40S", "healthy")] * 3 + [("NVIDIA L40S", "faulted")]
    saved = json.loads((data / "known-gpus.json").read_text())
    assert saved["format"] == 2
    assert {name: len(gpus) for name, gpus in saved["backends"].items()} == {"fake": 4, "intel": 1}


def test_the_flat_file_of_an_older_agent_is_migrated(
    machine_factory: Factory, tmp_path: Path, clock: FakeClock
) -> None:
    """An older agent's file (one flat map) that an old `inspect --backend intel` filled with
    an Intel GPU: the NVIDIA backend takes its own GPUs (one of them gone: still missing), the
    Intel GPU waits for the Intel backend and is missing for no one."""
    data = tmp_path / "data"
    machine = machine_factory("l40s-pcie")
    Scanner(name="", backend=machine, data_dir=data / "old", clock=clock).scan()
    new = json.loads((data / "old/known-gpus.json").read_text())["backends"]["fake"]
    intel = {
        "index": 0, "uuid": "intel-0000:03:00.0", "vendor": "intel", "model": "Intel GPU 0x0bd5",
        "memory_bytes": 0, "pci_bus_id": "0000:03:00.0", "numa_node": None, "xgmi_hive": None,
        "device_node": None,
    }  # fmt: skip
    (data / "known-gpus.json").write_text(json.dumps({"gpus": {**new, intel["uuid"]: intel}}))
    machine.remove_gpu(1)
    nvidia = Scanner(name="", backend=machine, data_dir=data, clock=clock)
    states = [(g.model, g.health.state.value) for g in nvidia.scan().gpus]
    assert states == [("NVIDIA L40S", "healthy")] * 3 + [("NVIDIA L40S", "faulted")]
    saved = json.loads((data / "known-gpus.json").read_text())
    assert (len(saved["backends"]["fake"]), list(saved["unsorted"])) == (4, [intel["uuid"]])
    sysfs = _intel_card(tmp_path / "intel-sys")
    under_intel = Scanner(name="n", backend="intel", sysfs_root=sysfs, data_dir=data, clock=clock)
    assert _health(under_intel) == [("Intel GPU 0x0bd5", "healthy")]
    saved = json.loads((data / "known-gpus.json").read_text())
    assert "unsorted" not in saved
    assert sorted(saved["backends"]) == ["fake", "intel"]


def test_inspect_before_the_agent_ran_measures_where_the_data_dir_will_be(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With no data directory yet (a new machine), `inspect` creates none and measures free
    disk on the folder that will hold it, without a warning."""
    data = tmp_path / "state" / "agent"
    assert main(["inspect", "--backend", "none", "--data-dir", str(data)]) == 0
    out = capsys.readouterr().out
    assert "cannot stat the data directory" not in out
    assert " free at the data directory" in out
    assert not (tmp_path / "state").exists()
