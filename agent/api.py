"""The agent's local API (loopback by default): what this machine looks like right now.

GET /v1/machine, /v1/gpus, /v1/gpus/{index-or-uuid}, /v1/rdma, /v1/health, and /metrics
(Prometheus text). Thin handlers: read the latest report, serialise. Errors are JSON with a
sentence, never a traceback."""

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from astraeus.shared import GpuHealthState, GpuInfo, MachineReport

from .metrics import CONTENT_TYPE, render
from .scanning import ScanService

SERVICE = web.AppKey("service", ScanService)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def create_app(service: ScanService) -> web.Application:
    app = web.Application(middlewares=[_json_errors])
    app[SERVICE] = service
    app.router.add_get("/v1/machine", machine)
    app.router.add_get("/v1/gpus", gpus)
    app.router.add_get("/v1/gpus/{gpu}", gpu)
    app.router.add_get("/v1/rdma", rdma)
    app.router.add_get("/v1/health", health)
    app.router.add_get("/metrics", metrics)
    return app


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


@web.middleware
async def _json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPNotFound:
        return _error(404, f"no such path {request.path}; see /v1/machine, /v1/gpus, /v1/rdma, "
                           "/v1/health, /metrics")  # fmt: skip
    except web.HTTPMethodNotAllowed:
        return _error(405, f"{request.method} is not allowed on {request.path}; use GET")


def _report(request: web.Request) -> MachineReport:
    report = request.app[SERVICE].report
    if report is None:
        raise web.HTTPServiceUnavailable(
            text='{"error": "the first scan has not finished yet"}',
            content_type="application/json",
        )
    return report


def _dump(value: Any) -> Any:
    return value.model_dump(mode="json")


async def machine(request: web.Request) -> web.Response:
    return web.json_response(_dump(_report(request)))


async def gpus(request: web.Request) -> web.Response:
    return web.json_response({"gpus": [_dump(g) for g in _report(request).gpus]})


async def gpu(request: web.Request) -> web.Response:
    wanted, report = request.match_info["gpu"], _report(request)
    found = _find_gpu(report.gpus, wanted)
    if found is None:
        known = ", ".join(str(g.index) for g in report.gpus) or "none"
        return _error(
            404, f"no GPU with index or UUID {wanted!r}; this machine's GPU indexes: {known}"
        )
    return web.json_response(_dump(found))


def _find_gpu(gpus: list[GpuInfo], wanted: str) -> GpuInfo | None:
    for info in gpus:
        if wanted == info.uuid or (wanted.isdigit() and int(wanted) == info.index):
            return info
    return None


async def rdma(request: web.Request) -> web.Response:
    return web.json_response({"ports": [_dump(p) for p in _report(request).rdma_ports]})


async def health(request: web.Request) -> web.Response:
    service = request.app[SERVICE]
    report = _report(request)
    counts = {state.value: 0 for state in GpuHealthState}
    for info in report.gpus:
        counts[info.health.state.value] += 1
    return web.json_response(
        {
            "scans": service.scans,
            "reported_at": report.reported_at.isoformat() if report.reported_at else None,
            "last_cause": service.last_cause,
            "watching": service.watching,
            "gpu_backend": _dump(report.gpu_backend),
            "gpus": counts,
            "unhealthy_gpus": [
                {"index": g.index, "uuid": g.uuid, **_dump(g.health)}
                for g in report.gpus
                if g.health.state != GpuHealthState.HEALTHY
            ],
            "conditions": [c.value for c in report.conditions],
            "cpu_pressure": report.cpu_pressure,
            "warnings": service.scanner.warnings,
        }
    )


async def metrics(request: web.Request) -> web.Response:
    """The latest scan in Prometheus text format; dcgm-exporter's names for GPU series."""
    service = request.app[SERVICE]
    report = _report(request)
    scanner = service.scanner
    text = render(report, scanner.telemetry, scanner.tracker, service.scans)
    return web.Response(body=text.encode(), headers={"Content-Type": CONTENT_TYPE})
