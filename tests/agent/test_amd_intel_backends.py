"""AMD through the fake amdsmi, the lazy real import, and Intel from sysfs DRM devices."""

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from astraeus.agent.backends import BackendUnavailableError
from astraeus.agent.backends.amd import AmdBackend, import_amdsmi
from astraeus.agent.backends.intel import IntelBackend, intel_cards
from astraeus.agent.fake import FakeMachine
from astraeus.agent.fake.amdsmi import FakeAmdSmi

Factory = Callable[[str], FakeMachine]


def test_amd_samples_identity_hive_and_counters(machine_factory: Factory) -> None:
    """MI300X GPUs come through with their VRAM, BDF, XGMI hive and PCIe link from sysfs."""
    machine = machine_factory("mi300x")
    assert machine.root is not None
    backend = AmdBackend(FakeAmdSmi(machine), sysfs_root=machine.root / "sys")
    samples = backend.sample()
    assert len(samples) == 8
    first = samples[0]
    assert (first.model, first.memory_bytes, first.pci_bus_id) == (
        "AMD Instinct MI300X", 192 * 1024**3, "0000:18:00.0",
    )  # fmt: skip
    assert (first.xgmi_hive, first.pcie_gen, first.pcie_width) == ("0x5ee5c0de", 5, 16)
    assert first.counters == {"ecc_corrected": 0.0, "pcie_replays": 0.0}
    backend.close()


def test_amd_unsupported_call_degrades_one_signal(machine_factory: Factory) -> None:
    """A GPU that cannot give its XGMI info still reports, noting what was missing."""
    machine = machine_factory("mi300x")
    machine.spec.gpus.unsupported = ["amdsmi_get_xgmi_info"]
    assert machine.root is not None
    sample = AmdBackend(FakeAmdSmi(machine), sysfs_root=machine.root / "sys").sample()[0]
    assert sample.xgmi_hive is None
    assert sample.unavailable == [
        "amdsmi_get_xgmi_info: AMDSMI_STATUS_NOT_SUPPORTED - Feature not supported"
    ]


def test_amdsmi_import_failure_is_library_not_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An amdsmi that prints and raises KeyError on import (no ROCm library) becomes a clear
    state, and its print does not reach our stdout."""
    (tmp_path / "amdsmi.py").write_text(
        "print('Could not load libamd_smi.so')\nraise KeyError('libamd_smi.so')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "amdsmi", raising=False)
    with pytest.raises(BackendUnavailableError) as raised:
        import_amdsmi()
    assert str(raised.value) == "AMD SMI library not found (KeyError('libamd_smi.so'))"
    assert capsys.readouterr().out == ""


def test_amdsmi_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the optional package the reason says it is not installed."""
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    with pytest.raises(BackendUnavailableError, match="the amdsmi package is not installed"):
        import_amdsmi()


def _card(sys_root: Path, name: str, vendor: str, driver: str, bdf: str) -> None:
    dev = sys_root / "devices/pci0000:00" / bdf
    dev.mkdir(parents=True)
    (dev / "vendor").write_text(vendor + "\n")
    (dev / "device").write_text("0x0bd5\n")
    (dev / "numa_node").write_text("1\n")
    drivers = sys_root / "bus/pci/drivers" / driver
    drivers.mkdir(parents=True, exist_ok=True)
    (dev / "driver").symlink_to(os.path.relpath(drivers, dev))
    card = sys_root / "class/drm" / name
    card.mkdir(parents=True)
    (card / "device").symlink_to(os.path.relpath(dev, card))


def test_intel_cards_from_drm(tmp_path: Path) -> None:
    """Intel i915/xe cards count; other vendors and connector entries do not."""
    _card(tmp_path, "card0", "0x8086", "xe", "0000:03:00.0")
    _card(tmp_path, "card1", "0x10de", "nvidia", "0000:18:00.0")
    _card(tmp_path, "card2", "0x8086", "i915", "0000:83:00.0")
    _card(tmp_path, "card0-DP-1", "0x8086", "xe", "0000:04:00.0")
    assert [c.card for c in intel_cards(tmp_path)] == [0, 2]
    samples = IntelBackend(tmp_path).sample()
    assert [(s.uuid, s.model, s.numa_node) for s in samples] == [
        ("intel-0000:03:00.0", "Intel GPU 0x0bd5", 1),
        ("intel-0000:83:00.0", "Intel GPU 0x0bd5", 1),
    ]


def test_no_intel_cards(tmp_path: Path) -> None:
    """No Intel DRM device makes the Intel backend unavailable, saying why."""
    with pytest.raises(BackendUnavailableError, match="Intel: no i915 or xe DRM device"):
        IntelBackend(tmp_path)
