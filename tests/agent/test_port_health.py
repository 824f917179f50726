"""RDMA port health from the port's state and the growth of its error counters."""

from collections.abc import Callable
from pathlib import Path

from astraeus.agent.fake import FakeMachine
from astraeus.agent.health import HealthPolicy
from astraeus.agent.health.rdma_ports import PortHealthTracker
from astraeus.agent.inventory import Scanner
from astraeus.agent.topology.rdma import read_counters
from astraeus.shared import LinkLayer, RdmaPort
from astraeus.shared.clock import FakeClock

Factory = Callable[[str], FakeMachine]


def _port(physical_state: str = "LinkUp") -> RdmaPort:
    return RdmaPort(device="mlx5_0", port=1, state="ACTIVE", physical_state=physical_state,
                    link_layer=LinkLayer.INFINIBAND, rate_gbps=400)  # fmt: skip


def test_counters_read_from_sysfs_skip_no_pma(machine_factory: Factory) -> None:
    """Error counters are read per port; a counter answering `N/A (no PMA)` is left out."""
    machine = machine_factory("h100-sxm")
    assert machine.root is not None
    port_dir = machine.root / "sys/class/infiniband/mlx5_0/ports/1/counters"
    (port_dir / "symbol_error").write_text("N/A (no PMA)\n")
    counters = read_counters(machine.root / "sys")
    assert len(counters) == 8
    assert "symbol_error" not in counters["mlx5_0:1"]
    assert counters["mlx5_1:1"]["link_downed"] == 0.0


def test_error_growth_puts_a_port_at_risk_then_clears(clock: FakeClock) -> None:
    """Growing error counters and a flapping link put the port at risk, in words, until quiet."""
    tracker = PortHealthTracker(HealthPolicy(quiet_seconds=120))
    zero = {"link_downed": 0, "symbol_error": 0, "port_rcv_errors": 0}
    assert tracker.classify([_port()], {"mlx5_0:1": zero}, clock.now())[0].at_risk is False
    clock.advance(30)
    grown = {"link_downed": 2, "symbol_error": 5, "port_rcv_errors": 1}
    port = tracker.classify([_port()], {"mlx5_0:1": grown}, clock.now())[0]
    assert port.at_risk is True
    assert [s.message for s in port.signals] == [
        "Link went down 2 times in the last 30 s",
        "Port errors: 6 new in the last 30 s (symbol_error 5, port_rcv_errors 1)",
    ]
    clock.advance(121)
    assert tracker.classify([_port()], {"mlx5_0:1": grown}, clock.now())[0].at_risk is False


def test_link_error_recovery_state_is_at_risk(clock: FakeClock) -> None:
    """A port whose physical state is LinkErrorRecovery is at risk now."""
    port = PortHealthTracker().classify([_port("LinkErrorRecovery")], {}, clock.now())[0]
    assert [s.message for s in port.signals] == ["Port is in link error recovery"]


def test_scan_reports_port_at_risk(
    machine_factory: Factory, tmp_path: Path, clock: FakeClock
) -> None:
    """A fake port whose symbol errors grow is reported at risk in the next scan."""
    machine = machine_factory("h100-sxm")
    scanner = Scanner(name="", backend=machine, data_dir=tmp_path / "d", clock=clock)
    scanner.scan()
    machine.add_port_errors(3, "symbol_error", 7)
    clock.advance(10)
    ports = scanner.scan().rdma_ports
    assert [p.device for p in ports if p.at_risk] == ["mlx5_3"]
    assert ports[3].signals[0].message == ("Port errors: 7 new in the last 10 s (symbol_error 7)")
