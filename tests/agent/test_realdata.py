"""The agent's real parsers on a real machine's /proc and /sys (../shared/realdata, read in
place): four RDMA ports with their speeds, the amdgpu card with its memory, the i915 card with its
PCI id, 8 cores, an estimate of available memory, eth0 at 1 Gb/s."""

import sys
from pathlib import Path

import pytest

from astraeus.agent.backends.intel import IntelBackend
from astraeus.agent.inventory import Scanner
from astraeus.agent.topology.rdma import read_counters, read_ports

from .conftest import NO_CAPTURE, require_capture

MEMFREE, FILE_LRU, SRECLAIMABLE = 440324, 6494020 + 6532440, 1738124  # kB, from its meminfo
AMD_DETAIL = (
    "sysfs amdgpu, 1 GPU; amdgpu present without AMD SMI (the amdsmi package is not installed): "
    "ECC, retired pages, throttling and XGMI are unknown; also present, not used: 1 Intel GPU "
    "(one GPU backend per machine)"
)


@pytest.fixture
def scanner(capture: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Scanner:
    monkeypatch.setitem(sys.modules, "amdsmi", None)  # AMD SMI not installed, whatever the host
    return Scanner(
        name="capture",
        backend="amdsmi",
        sysfs_root=capture / "sys",
        proc_root=capture / "proc",
        dev_root=tmp_path / "dev",
        data_dir=tmp_path / "data",
    )


def test_four_rdma_ports_with_their_speeds(capture: Path) -> None:
    """hfi1_0 (Omni-Path, 100 Gb/s), mlx4_0 ports 1 and 2 (40 Gb/s), mlx5_0 (25 Gb/s), all up;
    only hfi1_0 is Omni-Path; their error counters read as numbers."""
    ports = read_ports(capture / "sys")
    assert [(p.hca_name, p.state, p.rate_gbps, p.omni_path) for p in ports] == [
        ("hfi1_0:1", "ACTIVE", 100.0, True),
        ("mlx4_0:1", "ACTIVE", 40.0, False),
        ("mlx4_0:2", "ACTIVE", 40.0, False),
        ("mlx5_0:1", "ACTIVE", 25.0, False),
    ]
    assert [p.pci_device for p in ports] == [None] * 4  # no device links in the capture
    assert read_counters(capture / "sys")["mlx4_0:2"]["symbol_error"] == 0.0


def test_the_amdgpu_card_with_its_memory(scanner: Scanner) -> None:
    """Without AMD SMI the amdgpu card is read from sysfs: its VRAM, bus id from uevent, how
    busy, the unique id as UUID; the status says AMD SMI is missing and what is unknown."""
    report = scanner.scan()
    assert (report.gpu_backend.name, report.gpu_backend.detail) == ("amdgpu", AMD_DETAIL)
    [gpu] = report.gpus
    assert (gpu.vendor.value, gpu.model, gpu.memory_bytes, gpu.pci_bus_id, gpu.uuid) == (
        "amd", "AMD GPU 0x687f", 8573157376, "0000:09:00.0", "GPU-0123456789abcdef",
    )  # fmt: skip
    assert gpu.health.state.value == "healthy"
    sample = scanner.telemetry.samples[gpu.uuid]
    assert (sample.memory_used_bytes, sample.utilization_percent) == (1490378752, 4.0)
    assert "ECC errors, retired pages, throttling, XGMI: unknown without AMD SMI (GPUs 0)" in (
        scanner.warnings
    )


def test_the_i915_card_with_its_pci_id(capture: Path) -> None:
    """The i915 card has no vendor file: its PCI id and slot come from uevent, and neither its
    bus id nor its UUID is ever the word `device`."""
    [gpu] = IntelBackend(capture / "sys").sample()
    assert (gpu.model, gpu.pci_bus_id, gpu.uuid) == (
        "Intel GPU 0x5917", "0000:00:02.0", "intel-0000:00:02.0",
    )  # fmt: skip


def test_host_cores_memory_estimate_and_ethernet(scanner: Scanner) -> None:
    """8 cores from /proc/stat (no cpu/online; never this host's count); available memory is
    the kernel's estimate, as the capture's meminfo has no MemAvailable and no zoneinfo; eth0
    is up at 1 Gb/s and gets none of this host's addresses."""
    report = scanner.scan()
    assert report.cpu_cores == 8.0
    assert report.memory_bytes == 15666184 * 1024
    assert report.free_memory_bytes == (MEMFREE + FILE_LRU + SRECLAIMABLE) * 1024 == 15569825792
    assert report.conditions == []
    assert scanner.warnings[0] == (
        "meminfo has no MemAvailable and zoneinfo cannot be read: available memory is "
        "estimated without the zones' low watermarks"
    )
    [eth0] = report.network_interfaces
    assert (eth0.name, eth0.state, eth0.speed_mbps, eth0.physical, eth0.ipv4, eth0.ipv6) == (
        "eth0", "up", 1000, True, [], [],
    )  # fmt: skip
    assert [p.hca_name for p in report.rdma_ports] == [
        "hfi1_0:1", "mlx4_0:1", "mlx4_0:2", "mlx5_0:1",
    ]  # fmt: skip


def test_a_missing_capture_skips_saying_where_it_was_looked_for(tmp_path: Path) -> None:
    """Without ../shared the real-data tests skip with a sentence, not an error."""
    with pytest.raises(pytest.skip.Exception) as skipped:
        require_capture({"ASTRAEUS_REALDATA": str(tmp_path / "absent")})
    assert str(skipped.value) == NO_CAPTURE


def test_metrics_of_the_captured_machine(scanner: Scanner) -> None:
    """The amdgpu card's memory and busy percent under dcgm-exporter's names; what only AMD SMI
    knows (remaps, retired pages, double-bit ECC) is absent rather than a false 0; the four
    ports and the estimated memory are there."""
    from prometheus_client.parser import text_string_to_metric_families

    from astraeus.agent.metrics import render

    report = scanner.scan()
    text = render(report, scanner.telemetry, scanner.tracker, scans=1)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    [used] = families["DCGM_FI_DEV_FB_USED"].samples
    assert (used.value, families["DCGM_FI_DEV_GPU_UTIL"].samples[0].value) == (
        1490378752 / 1024**2, 4.0,
    )  # fmt: skip
    absent = {
        "DCGM_FI_DEV_ROW_REMAP_PENDING",
        "DCGM_FI_DEV_RETIRED_PENDING",
        "DCGM_FI_DEV_GPU_TEMP",
    }
    assert absent.isdisjoint(families)
    assert [s.labels["device"] for s in families["astraeus_rdma_port_up"].samples] == [
        "hfi1_0", "mlx4_0", "mlx4_0", "mlx5_0",
    ]  # fmt: skip
    assert families["astraeus_host_memory_available_estimated"].samples[0].value == 1
    assert families["astraeus_host_cpu_cores"].samples[0].value == 8


def test_inspect_shows_the_captured_machine(capture: Path, tmp_path: Path) -> None:
    """`astraeus-agent inspect` on the capture: 8 cores, the amdgpu card, Omni-Path named as
    such, eth0 at 1 Gb/s."""
    import subprocess

    out = subprocess.run(
        [sys.executable, "-m", "astraeus.agent.cli", "inspect", "--backend", "intel",
         "--sysfs-root", str(capture / "sys"), "--proc-root", str(capture / "proc"),
         "--data-dir", str(tmp_path), "--name", "capture"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    lines = out.splitlines()
    assert lines[1].startswith("Host: 8 cores, 15 GiB memory (15 GiB available)")
    assert "  0    Intel GPU 0x5917  0 GiB   0000:00:02.0  -     healthy  -              " in out
    assert "  hfi1_0:1  ACTIVE  LinkUp    Omni-Path   100 Gb/s  -       -     -    -" in lines
    assert "Network: eth0 (up, 1 Gb/s)" in lines
