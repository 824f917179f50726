"""The local API on a real aiohttp server on 127.0.0.1."""

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from astraeus.agent.api import create_app
from astraeus.agent.fake import FakeMachine
from astraeus.agent.inventory import Scanner
from astraeus.agent.scanning import ScanService
from astraeus.shared.clock import FakeClock

Client = TestClient[Any, web.Application]


@pytest.fixture
async def service(
    machine_factory: Callable[[str], FakeMachine], tmp_path: Path, clock: FakeClock
) -> ScanService:
    machine = machine_factory("h100-at-risk")
    return ScanService(Scanner(name="", backend=machine, data_dir=tmp_path / "d", clock=clock))


@pytest.fixture
async def client(
    service: ScanService, aiohttp_client: Callable[[web.Application], Awaitable[Client]]
) -> Client:
    await service.scan_now()
    client = await aiohttp_client(create_app(service))
    assert client.server.host == "127.0.0.1"
    return client


async def test_machine_is_the_report(client: Client) -> None:
    """/v1/machine answers the whole report with its schema version."""
    response = await client.get("/v1/machine")
    assert response.status == 200
    body = await response.json()
    assert (body["schema_version"], body["name"], len(body["gpus"])) == ("1.0", "h100-at-risk", 8)


async def test_gpus_by_index_and_uuid(client: Client, service: ScanService) -> None:
    """/v1/gpus lists them; /v1/gpus/{id} finds one by index or by UUID."""
    listed = (await (await client.get("/v1/gpus")).json())["gpus"]
    assert [g["index"] for g in listed] == list(range(8))
    by_index = await (await client.get("/v1/gpus/5")).json()
    assert by_index["health"]["state"] == "faulted"
    by_uuid = await (await client.get(f"/v1/gpus/{by_index['uuid']}")).json()
    assert by_uuid == by_index


async def test_unknown_gpu_is_a_clear_404(client: Client) -> None:
    """An unknown GPU is a 404 with a sentence listing the indexes there are."""
    response = await client.get("/v1/gpus/GPU-nope")
    assert response.status == 404
    assert await response.json() == {
        "error": "no GPU with index or UUID 'GPU-nope'; this machine's GPU indexes: "
        "0, 1, 2, 3, 4, 5, 6, 7"
    }


async def test_rdma_ports(client: Client) -> None:
    """/v1/rdma lists the ports with their state, rate and fabric."""
    ports = (await (await client.get("/v1/rdma")).json())["ports"]
    assert [(p["device"], p["state"], p["rate_gbps"]) for p in ports] == [
        ("mlx5_0", "ACTIVE", 400.0), ("mlx5_1", "ACTIVE", 400.0),
        ("mlx5_2", "DOWN", 400.0), ("mlx5_3", "ACTIVE", 10.0),
    ]  # fmt: skip


async def test_health_summarises(client: Client) -> None:
    """/v1/health counts GPUs by state and lists the unhealthy ones with their signals."""
    body = await (await client.get("/v1/health")).json()
    assert body["gpus"] == {"healthy": 5, "at_risk": 1, "faulted": 2}
    assert [(g["index"], g["state"]) for g in body["unhealthy_gpus"]] == [
        (1, "at_risk"), (5, "faulted"), (6, "faulted"),
    ]  # fmt: skip
    assert body["unhealthy_gpus"][0]["signals"][0]["message"] == (
        "Row remap pending: reset the GPU at the next opportunity"
    )
    assert (body["scans"], body["conditions"], body["cpu_pressure"]) == (1, [], False)


async def test_unknown_path_and_method_are_json(client: Client) -> None:
    """Unknown paths and methods answer JSON sentences, not HTML."""
    missing = await client.get("/v1/nothing")
    assert missing.status == 404
    assert (await missing.json())["error"].startswith("no such path /v1/nothing; see /v1/machine")
    wrong = await client.post("/v1/machine")
    assert wrong.status == 405
    assert await wrong.json() == {"error": "POST is not allowed on /v1/machine; use GET"}


async def test_before_the_first_scan(
    service: ScanService, aiohttp_client: Callable[[web.Application], Awaitable[Client]]
) -> None:
    """Before the first scan the API says so with a 503 rather than an empty machine."""
    client = await aiohttp_client(create_app(service))
    response = await client.get("/v1/machine")
    assert response.status == 503
    assert await response.json() == {"error": "the first scan has not finished yet"}


async def test_metrics_parse_as_prometheus_text(client: Client, service: ScanService) -> None:
    """/metrics is Prometheus text the real parser reads: dcgm-exporter's GPU series with its
    labels, health by state, signals, Xid counts by class, RDMA ports and host pressure."""
    from prometheus_client.parser import text_string_to_metric_families

    response = await client.get("/metrics")
    assert response.status == 200
    assert response.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    families = {f.name: f for f in text_string_to_metric_families(await response.text())}
    gpu5 = service.scanner.scan().gpus[5]
    temp = families["DCGM_FI_DEV_GPU_TEMP"]
    assert (temp.type, len(temp.samples)) == ("gauge", 8)
    assert temp.samples[5].labels == {
        "gpu": "5", "UUID": gpu5.uuid, "pci_bus_id": "0000:ab:00.0",
        "modelName": "NVIDIA H100 80GB HBM3", "Hostname": "h100-at-risk",
    }  # fmt: skip
    assert temp.samples[5].value == 40.0

    def value(name: str, **labels: str) -> float:
        found = [s.value for s in families[name].samples if labels.items() <= s.labels.items()]
        assert len(found) == 1, (name, labels)
        return found[0]

    assert value("DCGM_FI_DEV_POWER_USAGE", gpu="0") == 350.0
    assert value("DCGM_FI_DEV_FB_TOTAL", gpu="0") == 80 * 1024
    assert value("DCGM_FI_DEV_FB_FREE", gpu="0") == 80 * 1024
    assert value("DCGM_FI_DEV_XID_ERRORS", gpu="5") == 79
    assert value("astraeus_gpu_xid_events", gpu="5", **{"class": "fatal"}) == 1
    assert value("astraeus_gpu_health", gpu="5", state="faulted") == 1
    assert value("astraeus_gpu_health", gpu="5", state="healthy") == 0
    assert value("astraeus_gpu_signal", gpu="1", kind="row_remap_pending") == 1
    assert value("DCGM_FI_DEV_ROW_REMAP_PENDING", gpu="1") == 1
    assert value("DCGM_FI_DEV_ROW_REMAP_PENDING", gpu="0") == 0
    assert families["DCGM_FI_DEV_PCIE_REPLAY_COUNTER"].type == "counter"
    assert value("astraeus_rdma_port_up", device="mlx5_2", port="1") == 0
    assert value("astraeus_rdma_port_rate_gbps", device="mlx5_3") == 10
    assert value("astraeus_rdma_port_rate_gbps", device="mlx5_0") == 400
    assert value("astraeus_rdma_port_errors", device="mlx5_0", counter="symbol_error") == 0
    assert value("astraeus_host_condition", condition="MemoryPressure") == 0
    assert value("astraeus_host_pressure_avg10_percent", resource="cpu", kind="some") == 0.5
    assert value("astraeus_agent_scans") == 1
