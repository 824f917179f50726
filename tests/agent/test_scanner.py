"""Full scans of whole fake machines through the real code paths."""

from collections.abc import Callable
from pathlib import Path

import pytest

from astraeus.agent.fake import FakeMachine, load_fake_machine
from astraeus.agent.inventory import Scanner
from astraeus.shared import SCHEMA_VERSION, GpuHealthState, LinkLayer, MachineReport
from astraeus.shared.clock import FakeClock

Factory = Callable[[str], FakeMachine]


def _scanner(machine: FakeMachine, tmp_path: Path, clock: FakeClock, **kw: object) -> Scanner:
    return Scanner(name="", backend=machine, data_dir=tmp_path / "data", clock=clock, **kw)  # type: ignore[arg-type]


def _states(report: MachineReport) -> list[str]:
    return [g.health.state.value for g in report.gpus]


def test_h100_box_full_report(machine_factory: Factory, tmp_path: Path, clock: FakeClock) -> None:
    """8 healthy H100s on NUMA 0/1 and 8 active NDR ports, with the machine's labels."""
    scanner = _scanner(machine_factory("h100-sxm"), tmp_path, clock)
    report = scanner.scan()
    assert report.schema_version == SCHEMA_VERSION
    assert report.name == "h100-sxm"
    assert report.gpu_backend.name == "fake"
    assert (report.cpu_cores, report.memory_bytes) == (224.0, 2048 * 1024**3)
    assert _states(report) == ["healthy"] * 8
    assert [g.numa_node for g in report.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert len(report.rdma_ports) == 8
    assert {(p.link_layer, p.rate_gbps, p.state, p.fabric) for p in report.rdma_ports} == {
        (LinkLayer.INFINIBAND, 400.0, "ACTIVE", "ib-fe80000000000000")
    }
    assert report.labels["topology.astraeus.io/rack"] == "rack-1"
    assert report.conditions == []
    assert report.imex.available is False
    scanner.close()


def test_gb200_tray_has_a_domain_and_imex(
    machine_factory: Factory, tmp_path: Path, clock: FakeClock
) -> None:
    """The NVL72 tray's 4 GPUs share the fabric clique's domain, and IMEX can be provided."""
    report = _scanner(machine_factory("gb200-nvl72-tray"), tmp_path, clock).scan()
    assert {g.nvlink_domain for g in report.gpus} == {"7b968a6d-c8aa-45e1-9e07-e1e51be99c31/1"}
    assert report.imex.available is True
    assert [p.device for p in report.rdma_ports] == ["ibp0s0f0", "ibp1s0f0", "ibp2s0f0", "ibp3s0f0"]


def test_mi300x_and_l40s(machine_factory: Factory, tmp_path: Path, clock: FakeClock) -> None:
    """MI300X reports its XGMI hive and RoCE netdevs; the L40S box has no RDMA at all."""
    amd = _scanner(machine_factory("mi300x"), tmp_path / "amd", clock).scan()
    assert {(g.vendor.value, g.xgmi_hive) for g in amd.gpus} == {("amd", "0x5ee5c0de")}
    assert [p.netdev for p in amd.rdma_ports][:2] == ["ens1f0np0", "ens2f0np0"]
    l40s = _scanner(machine_factory("l40s-pcie"), tmp_path / "l40s", clock).scan()
    assert len(l40s.gpus) == 4
    assert l40s.rdma_ports == []


def test_at_risk_machine_over_time(
    machine_factory: Factory, tmp_path: Path, clock: FakeClock
) -> None:
    """At first only states and Xids show; after a minute the growing counters do too."""
    scanner = _scanner(machine_factory("h100-at-risk"), tmp_path, clock)
    first = scanner.scan()
    assert _states(first) == [
        "healthy", "at_risk", "healthy", "healthy", "healthy", "faulted", "faulted", "healthy",
    ]  # fmt: skip
    clock.advance(60)
    later = scanner.scan()
    assert _states(later)[2:5] == ["at_risk", "at_risk", "at_risk"]
    assert [s.message for s in later.gpus[2].health.signals] == [
        "PCIe replays: 41/min, above 31/min for Gen5 x16"
    ]
    assert [s.message for s in later.gpus[4].health.signals] == [
        "Thermal throttling: 18 s of the last 60 s (HW thermal slowdown now)"
    ]
    ports = {p.device: p for p in later.rdma_ports}
    assert (ports["mlx5_2"].state, ports["mlx5_2"].physical_state) == ("DOWN", "Polling")
    assert ports["mlx5_3"].rate_gbps == 10.0


def test_missing_and_lost_gpus_are_faulted(
    machine_factory: Factory, tmp_path: Path, clock: FakeClock
) -> None:
    """A GPU that disappears stays in the report, faulted; one that is lost keeps its identity."""
    machine = machine_factory("h100-sxm")
    scanner = _scanner(machine, tmp_path, clock)
    scanner.scan()
    machine.remove_gpu(7)
    machine.lose_gpu(0)
    report = scanner.scan()
    by_uuid = {g.uuid: g for g in report.gpus}
    missing = by_uuid[machine.gpu_uuid(7)]
    assert [s.message for s in missing.health.signals] == [
        "GPU missing: it was at 0000:db:00.0 and the driver no longer lists it"
    ]
    lost = by_uuid[machine.gpu_uuid(0)]
    assert (lost.health.state, lost.model, lost.pci_bus_id) == (
        GpuHealthState.FAULTED, "NVIDIA H100 80GB HBM3", "0000:18:00.0",
    )  # fmt: skip


def test_missing_gpu_survives_a_restart_until_revalidated(
    machine_factory: Factory, tmp_path: Path, clock: FakeClock
) -> None:
    """A GPU gone while the agent was down is still reported missing; revalidating forgets it."""
    machine = machine_factory("l40s-pcie")
    _scanner(machine, tmp_path, clock).scan()
    machine.remove_gpu(2)
    restarted = _scanner(machine, tmp_path, clock)
    report = restarted.scan()
    assert [(g.index, g.health.state.value) for g in report.gpus] == [
        (0, "healthy"), (1, "healthy"), (2, "healthy"), (2, "faulted"),
    ]  # fmt: skip
    assert restarted.revalidate(machine.gpu_uuid(2)) is True
    assert len(restarted.scan().gpus) == 3
    assert restarted.revalidate(machine.gpu_uuid(2)) is False


def test_driver_gaps_are_warnings_grouped_by_call(
    machine_factory: Factory, tmp_path: Path, clock: FakeClock
) -> None:
    """Calls the driver lacks are one warning per call, naming the GPUs, not a failure."""
    machine = machine_factory("l40s-pcie")
    machine.spec.gpus.unsupported = ["nvmlDeviceGetRemappedRows"]
    scanner = _scanner(machine, tmp_path, clock)
    assert [g.health.state.value for g in scanner.scan().gpus] == ["healthy"] * 4
    assert scanner.warnings == ["nvmlDeviceGetRemappedRows: Function Not Found (GPUs 0, 1, 2, 3)"]


def test_fatal_xid_is_remembered_across_scanners(
    machine_factory: Factory, tmp_path: Path, clock: FakeClock
) -> None:
    """A fatal Xid seen by one agent run still faults the GPU after a restart."""
    machine = machine_factory("h100-sxm")
    scanner = _scanner(machine, tmp_path, clock)
    scanner.scan()
    machine.inject_xid(3, 119)
    assert _states(scanner.scan())[3] == "faulted"
    scanner.close()
    again = _scanner(load_fake_machine("h100-sxm", clock=clock), tmp_path, clock).scan()
    assert _states(again)[3] == "faulted"


def test_no_backend_reports_why(tmp_path: Path, clock: FakeClock) -> None:
    """A CPU-only machine reports no GPUs and every reason, with its own host figures."""
    scanner = Scanner(name="cpu-1", backend="auto", sysfs_root=tmp_path / "sys",
                      proc_root=tmp_path / "proc", data_dir=tmp_path, clock=clock)  # fmt: skip
    report = scanner.scan()
    assert report.gpus == []
    assert report.gpu_backend.name == "none"
    assert report.gpu_backend.detail.startswith("no GPUs: NVML: NVML Shared Library Not Found; ")
    assert report.gpu_backend.detail.endswith("Intel: no i915 or xe DRM device")
    assert "cannot read meminfo" in scanner.warnings


def test_fake_by_name_writes_its_tree_and_explicit_labels_win(
    tmp_path: Path, clock: FakeClock
) -> None:
    """`fake:<name>` writes the tree under the data dir; labels given to the scanner win."""
    scanner = Scanner(name="n1", backend="fake:l40s-pcie", data_dir=tmp_path, clock=clock,
                      labels={"pool": "special"})  # fmt: skip
    report = scanner.scan()
    assert (tmp_path / "fake/n1/proc/meminfo").exists()
    assert report.name == "n1"
    assert report.labels["pool"] == "special"


def _spec(tmp_path: Path, text: str, clock: FakeClock) -> FakeMachine:
    path = tmp_path / "machine.toml"
    path.write_text('name = "m"\ncores = 8\nmemory_gb = 64\n' + text)
    machine = load_fake_machine(str(path), clock=clock)
    machine.write_tree(tmp_path / "root")
    return machine


def test_amd_throttling_without_a_break_is_at_risk(tmp_path: Path, clock: FakeClock) -> None:
    """AMD only says whether it throttles now: a whole minute of it puts the GPU at risk."""
    machine = _spec(tmp_path, '[gpus]\nvendor = "amd"\ncount = 2\nmodel = "AMD Instinct MI300X"\n'
                    "memory_gb = 192\n[gpu.1]\nthermal_throttle_fraction = 1\n", clock)  # fmt: skip
    scanner = _scanner(machine, tmp_path, clock)
    assert _states(scanner.scan()) == ["healthy", "healthy"]
    clock.advance(60)
    report = scanner.scan()
    assert _states(report) == ["healthy", "at_risk"]
    assert report.gpus[1].health.signals[0].message == "Throttling: for 60 s without a break"


def test_intel_fake_machine_reports_identity(tmp_path: Path, clock: FakeClock) -> None:
    """A fake Intel machine is found through its sysfs DRM devices alone."""
    machine = _spec(tmp_path, '[gpus]\nvendor = "intel"\ncount = 2\n', clock)
    report = _scanner(machine, tmp_path, clock).scan()
    assert [(g.vendor.value, g.model, g.pci_bus_id) for g in report.gpus] == [
        ("intel", "Intel GPU 0x0bd5", "0000:18:00.0"),
        ("intel", "Intel GPU 0x0bd5", "0000:2a:00.0"),
    ]


def test_fabric_disagreement_and_degraded_health(tmp_path: Path, clock: FakeClock) -> None:
    """GPUs in two cliques give no domain and a warning; a degraded fabric is at risk."""
    uuid = 'cluster_uuid = "7b968a6d-c8aa-45e1-9e07-e1e51be99c31"'
    machine = _spec(tmp_path, '[gpus]\ncount = 2\nmodel = "NVIDIA GB200"\nmemory_gb = 186\n'
                    f"fabric = {{ {uuid}, clique_id = 1 }}\n[gpu.1]\n"
                    f'fabric = {{ {uuid}, clique_id = 2, health = "degraded" }}\n',
                    clock)  # fmt: skip
    scanner = _scanner(machine, tmp_path, clock)
    report = scanner.scan()
    assert [g.nvlink_domain for g in report.gpus] == [None, None]
    assert scanner.warnings == [
        "GPUs disagree on their NVLink domain (7b968a6d-c8aa-45e1-9e07-e1e51be99c31/1, "
        "7b968a6d-c8aa-45e1-9e07-e1e51be99c31/2); reporting none"
    ]
    assert [s.message for s in report.gpus[1].health.signals] == [
        "NVLink fabric bandwidth degraded"
    ]


def test_one_fake_file_many_agents(tmp_path: Path, clock: FakeClock) -> None:
    """Two agents running one fake file under different names report different GPU UUIDs."""
    one = Scanner(name="node-1", backend="fake:l40s-pcie", data_dir=tmp_path / "1", clock=clock)
    two = Scanner(name="node-2", backend="fake:l40s-pcie", data_dir=tmp_path / "2", clock=clock)
    uuids_one = {g.uuid for g in one.scan().gpus}
    uuids_two = {g.uuid for g in two.scan().gpus}
    assert len(uuids_one) == 4
    assert uuids_one.isdisjoint(uuids_two)


def test_data_dir_defaults_like_the_runtime_state_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a data dir the scanner uses systemd's StateDirectory, as the runtime does."""
    monkeypatch.setenv("STATE_DIRECTORY", f"{tmp_path}/a:{tmp_path}/b")
    scanner = Scanner(name="n", backend="fake:l40s-pcie")
    assert scanner.data_dir == tmp_path / "a"


def test_scanner_as_the_runtime_calls_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`Scanner(name=, backend=, sysfs_root=)` alone works, keeping its files in the state dir."""
    monkeypatch.setenv("STATE_DIRECTORY", str(tmp_path))
    scanner = Scanner(name="n", backend="fake:l40s-pcie", sysfs_root=Path("/sys"))
    assert len(scanner.scan().gpus) == 4
    assert (tmp_path / "known-gpus.json").exists()
