"""`astraeus-agent --coordinator URL --token-file PATH`: the agent's long-running service."""

import asyncio
import importlib
import logging
import os
import signal
import ssl
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import aiohttp

from astraeus.agent.settings import Settings, load_settings, read_token
from astraeus.shared import MachineReport
from astraeus.shared.sdnotify import Notifier
from astraeus.shared.settings import SettingsError
from astraeus.shared.tls import (
    CaFileError,
    client_context,
    plain_http_refusal,
    plain_http_to_another_machine,
)

from ..topology.route import route_source
from .client import CoordinatorClient
from .container import ContainerRuntimes
from .launch import choose_launcher
from .loop import Agent, LoopConfig, Scan
from .runner import Runner, RunnerConfig
from .state import Outbox, StateDir
from .users import DYNAMIC, WorkerUserError, WorkerUsers, worker_users

if TYPE_CHECKING:
    from astraeus.agent.scanning import ScanService

log = logging.getLogger("astraeus.agent")
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def main(argv: Sequence[str]) -> int:
    """Run the agent until SIGTERM or SIGINT; 2 for bad settings, 0 after a clean stop."""
    try:
        settings = load_settings(argv, os.environ)
        token = read_token(settings.token_file)
        tls_context(settings)  # a bad CA file is a settings error now, not at the first report
        check_transport(settings)
        settings_users(settings)  # workers as root without the operator's say-so: refused here
        # Before the scanner opens its backend, so the log's first lines say which GPU backend
        # was chosen and why the others were not (a machine joining with 0 GPUs says why).
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
        scans = make_scan(settings)
        # An empty name is the fake machine's, else the host's: as the scanner resolved it.
        settings = replace(settings, name=scans.scanner.name)
    except SystemExit as done:  # argparse: --help, or a usage error it already printed
        return int(done.code or 0)
    except (SettingsError, CaFileError, WorkerUserError) as error:
        print(f"astraeus-agent: {error}", file=sys.stderr)
        return 2
    asyncio.run(serve_scanning(settings, token, scans))
    return 0


def make_scan(settings: Settings) -> "ScanService":
    """The inventory's scanning service: periodic scans, udev rescans, port polling, Xid events.

    Imported only here so the runtime's own tests need no discovery backend."""
    try:
        inventory = importlib.import_module("astraeus.agent.inventory")
        service = importlib.import_module("astraeus.agent.scanning")
    except ImportError as error:
        raise SettingsError(
            f"machine discovery (astraeus.agent.inventory) is not available: {error}"
        ) from None
    try:
        scanner = inventory.scanner_for(settings)
    except (TypeError, ValueError, OSError) as error:
        raise SettingsError(f"backend {settings.backend}: {error}") from None
    scans: ScanService = service.ScanService(scanner)
    return scans


async def serve_scanning(settings: Settings, token: str, scans: "ScanService") -> None:
    """`serve` with the discovery service scanning alongside: periodic scans, udev and Xid
    rescans, port polling; each report sends its latest result."""
    await scans.start()

    def scan() -> MachineReport:
        assert scans.report is not None  # start() scanned once  # noqa: S101
        return scans.report

    try:
        await serve(settings, token, scan)
    finally:
        await scans.stop()


def settings_users(settings: Settings) -> WorkerUsers:
    """Who workers run as; a WorkerUserError refuses root without the operator's say-so."""
    return worker_users(
        settings.worker_user, settings.worker_uids, root_allowed=settings.allow_root_workers
    )


async def serve(settings: Settings, token: str, scan: Scan) -> None:
    """The agent's whole life: workers outlive it, on purpose."""
    notifier = Notifier.from_environment()
    state = StateDir(settings.state_dir)
    users = settings_users(settings)
    log.log(logging.INFO if users.mode == DYNAMIC else logging.WARNING, "%s", users.describe())
    runtimes = ContainerRuntimes()
    await asyncio.to_thread(runtimes.refresh)  # said in the log before the first report
    config = RunnerConfig(
        stop_grace_seconds=settings.stop_grace_seconds,
        container_runtime=runtimes.known,
        uverbs=lambda: uverbs_nodes(settings.sysfs_root),
        users=users,
        work_root=settings.work_root,
        env_passthrough=settings.worker_env_passthrough,
    )
    runner = Runner(state, Outbox(settings.state_dir / "outbox.json"), choose_launcher(), config)
    if users.switches:
        runner.work.warn_if_closed()
    stop, loop = asyncio.Event(), asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, _stopper(notifier, stop))
    try:
        await _run(settings, token, scan, runner, notifier, stop, runtimes)
    finally:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)


async def _run(
    settings: Settings,
    token: str,
    scan: Scan,
    runner: Runner,
    notifier: Notifier,
    stop: asyncio.Event,
    runtimes: ContainerRuntimes,
) -> None:
    loop_config = LoopConfig(
        report_interval_seconds=settings.report_interval_seconds,
        backoff_max_seconds=settings.backoff_max_seconds,
    )
    connector = aiohttp.TCPConnector(ssl=tls_context(settings))
    async with aiohttp.ClientSession(connector=connector) as session:
        client = CoordinatorClient(
            session, settings.coordinator, settings.name, token, str(settings.token_file)
        )
        agent = Agent(
            client,
            runner,
            scan,
            notifier=notifier,
            config=loop_config,
            capabilities=runtimes.capabilities,
            advertise=advertiser(settings, client),
        )
        urls = client.coordinators.urls
        to = urls[0] if len(urls) == 1 else f"whichever of {', '.join(urls)} leads"
        log.info("reporting as %s to %s", settings.name, to)
        await agent.run(stop)


def advertiser(settings: Settings, client: CoordinatorClient) -> Callable[[], str | None]:
    """The `advertise_address` setting, else the source address of the route to the
    coordinator (the one that led last), found again before each report."""
    if settings.advertise_address:
        return lambda: settings.advertise_address
    return lambda: route_source(client.coordinators.current)


def tls_context(settings: Settings) -> ssl.SSLContext:
    """The coordinator's certificate is checked against `ca_file`, else the system's store."""
    return client_context(settings.ca_file)


def check_transport(settings: Settings) -> None:
    """The agent's token never crosses the network unencrypted unless the operator says so: each
    coordinator listed is checked."""
    if settings.allow_plain_http:
        return
    for url in settings.coordinator.split(","):
        if plain_http_to_another_machine(url):
            allow = "allow_plain_http = true (--allow-plain-http)"
            raise SettingsError(plain_http_refusal("coordinator", url, allow))


def _stopper(notifier: Notifier, stop: asyncio.Event) -> Callable[[], None]:
    def handler() -> None:
        notifier.stopping()
        log.info("stopping; workers keep running and are found again at the next start")
        stop.set()

    return handler


def uverbs_nodes(sysfs_root: Path) -> dict[str, str]:
    """RDMA device name → its `/dev/infiniband/uverbsN` node, from sysfs."""
    nodes = {}
    for verbs in sorted((sysfs_root / "class" / "infiniband").glob("*/device/infiniband_verbs/*")):
        nodes[verbs.parent.parent.parent.name] = f"/dev/infiniband/{verbs.name}"
    return nodes
