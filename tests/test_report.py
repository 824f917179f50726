"""The machine report: lenient with new fields, strict about the schema's major version."""

from typing import Any

import pytest
from pydantic import ValidationError

from astraeus.shared import SCHEMA_VERSION, MachineReport, field_errors


def _report(**overrides: Any) -> dict[str, Any]:
    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "name": "gpu-01",
        "cpu_cores": 96,
        "memory_bytes": 2 * 1024**4,
        "gpus": [
            {
                "index": 0,
                "uuid": "GPU-00000000-0000-0000-0000-000000000000",
                "vendor": "nvidia",
                "model": "NVIDIA H100 80GB HBM3",
                "memory_bytes": 85520809984,
                "pci_bus_id": "0000:18:00.0",
                "numa_node": 0,
                "health": {
                    "state": "at_risk",
                    "signals": [{"kind": "pcie_replay", "message": "x"}],
                },
            }
        ],
        "rdma_ports": [
            {
                "device": "mlx5_0",
                "port": 1,
                "state": "ACTIVE",
                "link_layer": "InfiniBand",
                "rate_gbps": 400,
            }
        ],
    }
    report.update(overrides)
    return report


def _problems(report: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        MachineReport.model_validate(report)
    return [str(e) for e in field_errors(MachineReport, caught.value)]


def test_report_parses() -> None:
    """A full report parses into typed GPUs and ports."""
    report = MachineReport.model_validate(_report())
    assert report.gpus[0].health.state == "at_risk"
    assert report.rdma_ports[0].hca_name == "mlx5_0:1"
    assert report.rdma_ports[0].up


def test_unknown_fields_are_ignored_for_rolling_upgrades() -> None:
    """A newer agent's extra fields (top level and nested) are ignored, not errors."""
    report = _report(new_thing={"a": 1}, schema_version="1.7")
    report["gpus"][0]["power_watts"] = 700
    parsed = MachineReport.model_validate(report)
    assert "new_thing" not in parsed.model_dump()
    assert "power_watts" not in parsed.gpus[0].model_dump()


def test_missing_schema_version_is_rejected() -> None:
    """A report without a schema version is refused and says so."""
    report = _report()
    del report["schema_version"]
    assert _problems(report) == ["schema_version: is required"]


def test_newer_major_schema_is_rejected() -> None:
    """A report from another major version is refused with what to do about it."""
    assert _problems(_report(schema_version="2.0")) == [
        "schema_version: schema_version 2.0 is not supported: this coordinator reads 1.x; "
        "upgrade the coordinator and agent to the same major version"
    ]


def test_malformed_schema_version_is_rejected() -> None:
    """A schema version that is not MAJOR.MINOR is refused."""
    assert _problems(_report(schema_version="one")) == [
        "schema_version: 'one' does not match ^\\d+\\.\\d+$"
    ]


def test_bad_health_state_lists_allowed() -> None:
    """A GPU health state outside healthy/at_risk/faulted is refused with the allowed ones."""
    report = _report()
    report["gpus"][0]["health"]["state"] = "sick"
    assert _problems(report) == [
        "gpus[0].health.state: 'sick' is not allowed; use one of 'healthy', 'at_risk' or 'faulted'"
    ]
