"""`astraeus-coordinator`: serve the API (the default), or manage tokens in the database."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sqlite3
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from aiohttp import web

from astraeus.coordinator.api import create_app
from astraeus.coordinator.api.errors import MAX_REQUEST_LINE
from astraeus.coordinator.machine_records import MachineRecords
from astraeus.coordinator.scheduler import warm_worker, worker_pool
from astraeus.coordinator.settings import Settings, load
from astraeus.coordinator.standby import stand_by
from astraeus.coordinator.startup import open_store, shown_database, start
from astraeus.coordinator.store import Deposed, Role, StorageError, Store
from astraeus.coordinator.store.backup import BackupError, backup
from astraeus.coordinator.store.leader import Leadership, step_down
from astraeus.coordinator.store.lock import DatabaseInUseError
from astraeus.coordinator.store.transfer import TransferError, migrate
from astraeus.coordinator.tls import ServerCertificate, TlsError
from astraeus.shared.clock import SystemClock
from astraeus.shared.sdnotify import Notifier
from astraeus.shared.settings import SettingsError

log = logging.getLogger("astraeus.coordinator")

COMMANDS = ("serve", "token", "backup", "migrate")

SHUTDOWN_SECONDS = 5.0
"""On SIGTERM, requests already being answered get this long to finish."""

DESCRIPTION = """\
The Astraeus coordinator keeps the queue in SQLite (or PostgreSQL, with --database-url), places
runs on machines and serves the API
(`/api/v1`, OpenAPI at /api/v1/openapi.json) for the `astra` CLI, the console and the agents.
Settings come from --config (TOML), then ASTRAEUS_* variables (ASTRAEUS_DB, ASTRAEUS_LISTEN,
ASTRAEUS_DATABASE_URL, ASTRAEUS_STATE_DIR, ASTRAEUS_TLS_CERT, ASTRAEUS_DOWN_AFTER_SECONDS, ...),
then flags.
The state directory is $STATE_DIRECTORY under systemd, else $XDG_DATA_HOME/astraeus
(~/.local/share/astraeus). SIGHUP reloads the TLS certificate."""


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, help="TOML file of settings")
    parser.add_argument("--db", type=Path, help="the SQLite file (default: STATE_DIR/astraeus.db)")
    parser.add_argument(
        "--database-url",
        help="postgresql://USER@HOST:PORT/DB: keep the state in PostgreSQL 13+ instead of --db",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        help="the database and the first admin token (default: $STATE_DIRECTORY, else "
        "$XDG_DATA_HOME/astraeus)",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="astraeus-coordinator", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="run the coordinator (the default)")
    _common(serve)
    serve.add_argument("--listen", help="HOST:PORT (default 127.0.0.1:8470)")
    serve.add_argument(
        "--advertise-url",
        help="with --database-url: the URL clients should use for this coordinator while it"
        " leads; standbys send them there (default: the serving address)",
    )
    serve.add_argument("--cluster-name", help="the name users see (default: the short hostname)")
    serve.add_argument(
        "--console-url", help="the console's URL (default: the address the caller reached)"
    )
    serve.add_argument("--tls-cert", type=Path, help="serve HTTPS with this PEM certificate chain")
    serve.add_argument("--tls-key", type=Path, help="... and this PEM private key")
    serve.add_argument(
        "--allow-plain-http",
        action="store_true",
        default=None,
        help="serve plain HTTP on a non-loopback --listen (tokens in clear text)",
    )
    token = sub.add_parser("token", help="create, list or revoke API tokens")
    tsub = token.add_subparsers(dest="action", required=True)
    create = tsub.add_parser("create", help="print a new token (shown once)")
    _common(create)
    create.add_argument("--role", choices=[r.value for r in Role], required=True)
    create.add_argument("--workspace", help="for a member token")
    create.add_argument("--machine", help="for an agent token")
    create.add_argument("--description", default="")
    listing = tsub.add_parser("list", help="list tokens (never the secrets)")
    _common(listing)
    revoke = tsub.add_parser("revoke", help="revoke a token by id")
    _common(revoke)
    revoke.add_argument("id", type=int)
    backup = sub.add_parser(
        "backup", help="copy the database consistently, while the coordinator runs"
    )
    _common(backup)
    backup.add_argument("path", type=Path, help="where the copy goes (replaced if it exists)")
    moving = sub.add_parser(
        "migrate",
        help="copy a stopped coordinator's SQLite file into an empty PostgreSQL database",
        description="Copy the SQLite file (--db, or the one --config or --state-dir gives) of"
        " a stopped coordinator into an empty PostgreSQL database, in one transaction, and"
        " check it (row counts per table, checksums of the GPU and port holds) before it is"
        " committed. The file is only read.",
    )
    moving.add_argument("--to", required=True, metavar="postgresql://USER@HOST:PORT/DB")
    moving.add_argument("--config", type=Path, help="TOML file of settings (its db is copied)")
    moving.add_argument("--db", type=Path, help="the SQLite file (default: STATE_DIR/astraeus.db)")
    moving.add_argument("--state-dir", type=Path, help="where the SQLite file is by default")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and not args_list[0].startswith("-") and args_list[0] not in COMMANDS:
        print(f"astraeus-coordinator: unknown command {args_list[0]!r}\n", file=sys.stderr)
        _parser().print_usage(sys.stderr)
        return 2
    if not args_list or args_list[0] not in (*COMMANDS, "-h", "--help"):
        args_list = ["serve", *args_list]  # serve is the default command
    args = _parser().parse_args(args_list)
    try:
        settings = load(
            config=args.config,
            overrides={
                "db": args.db,
                "database_url": getattr(args, "database_url", None),
                "state_dir": args.state_dir,
                "listen": getattr(args, "listen", None),
                "advertise_url": getattr(args, "advertise_url", None),
                "cluster_name": getattr(args, "cluster_name", None),
                "console_url": getattr(args, "console_url", None),
                "tls_cert": getattr(args, "tls_cert", None),
                "tls_key": getattr(args, "tls_key", None),
                "allow_plain_http": getattr(args, "allow_plain_http", None),
            },
        )
    except SettingsError as exc:
        print(f"astraeus-coordinator: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if args.command == "token":
        return _token(args, settings)
    if args.command == "backup":
        if settings.database_url:
            print(
                "astraeus-coordinator: backup copies the SQLite file; back up a PostgreSQL"
                " database with its own tools (pg_dump, or the server's base backups)",
                file=sys.stderr,
            )
            return 2
        return _backup(settings.db, args.path)
    if args.command == "migrate":
        return _migrate(settings.db, args.to)
    try:
        certificate = _certificate(settings)
    except TlsError as exc:
        print(f"astraeus-coordinator: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(serve(settings, certificate))


def _certificate(settings: Settings) -> ServerCertificate | None:
    if settings.tls_cert is None or settings.tls_key is None:
        return None
    return ServerCertificate(settings.tls_cert, settings.tls_key)


def _backup(db: Path, target: Path) -> int:
    try:
        summary = backup(db, target)
    except BackupError as exc:
        print(f"astraeus-coordinator: {exc}", file=sys.stderr)
        return 1
    print(summary.line(db, target))
    return 0


def _migrate(db: Path, target: str) -> int:
    """`migrate --to`: the SQLite file (always the source, whatever `database_url` says)
    copied into `target`; 1 with the reason when refused or when the check fails."""
    try:
        moved = migrate(db, target)
    except (TransferError, DatabaseInUseError) as exc:
        print(f"astraeus-coordinator: {exc}", file=sys.stderr)
        return 1
    print("\n".join(moved.lines()))
    return 0


def _token(args: argparse.Namespace, settings: Settings) -> int:
    try:
        return _token_in(args, settings)
    except (StorageError, sqlite3.Error) as exc:
        print(f"astraeus-coordinator: {shown_database(settings)}: {exc}", file=sys.stderr)
        return 1


def _token_in(args: argparse.Namespace, settings: Settings) -> int:
    store = open_store(settings)
    clock = SystemClock()
    try:
        if args.action == "list":
            for info in store.tokens.all():
                owner = info.workspace or info.machine or ""
                print(
                    f"{info.id}\t{info.role.value}\t{owner}\t{info.created_at}\t{info.description}"
                )
            return 0
        if args.action == "revoke":
            if not store.tokens.revoke(args.id):
                print(f"astraeus-coordinator: no token with id {args.id}", file=sys.stderr)
                return 1
            return 0
        return _create_token(args, store, clock)
    finally:
        store.close()


def _create_token(args: argparse.Namespace, store: Store, clock: SystemClock) -> int:
    role = Role(args.role)
    if role == Role.MEMBER and (not args.workspace or store.workspaces.get(args.workspace) is None):
        print(
            "astraeus-coordinator: --workspace must name an existing workspace for a member token"
            " (create it with PUT /api/v1/workspaces/<name>)",
            file=sys.stderr,
        )
        return 2
    if role == Role.AGENT and not args.machine:
        print("astraeus-coordinator: --machine is required for an agent token", file=sys.stderr)
        return 2
    if role == Role.AGENT:
        store.machines.ensure(args.machine, clock.now())  # no service runs: the row only
    secret, _ = store.tokens.create(
        role,
        clock.now(),
        workspace=args.workspace if role == Role.MEMBER else None,
        machine=args.machine if role == Role.AGENT else None,
        description=args.description,
    )
    print(secret)
    return 0


async def serve(settings: Settings, certificate: ServerCertificate | None = None) -> int:
    """Serve until SIGTERM or SIGINT. On PostgreSQL, first stand by until this process takes
    the leader's lease (`standby.py`), then start as a restart would; a leader deposed later
    exits with `EX_TEMPFAIL` at once (`leader.step_down`)."""
    # A scheduler pass computes in a worker process, but a dry run in a thread of this one.
    # Handing the GIL back to the event loop every millisecond (not every 5) keeps agents'
    # reports answered sooner while a dry run computes.
    sys.setswitchinterval(0.001)
    # Read and drop the systemd variables, so the pass worker process does not inherit them.
    notifier = Notifier.from_environment()
    leadership: Leadership | None = None
    if settings.database_url:
        if not settings.advertise_url and settings.host.strip("[]") in ("0.0.0.0", "::"):  # noqa: S104
            log.warning(
                "listen is %s and advertise_url is not set: standbys will send clients to"
                " %s://%s, which they cannot reach; set advertise_url (--advertise-url)",
                settings.listen,
                settings.scheme,
                settings.listen,
            )
        leadership = Leadership(
            settings.database_url,
            advertise=settings.advertise_url or _advertised(settings),
            lease_seconds=settings.leader_lease_seconds,
        )
        outcome = await stand_by(settings, leadership, notifier, certificate)
        if isinstance(outcome, int):
            return outcome
        settings = outcome
        leadership.start_renewing(step_down)
    # The pass worker starts (and imports the engine) while this process loads its store.
    pool = worker_pool(start_now=True) if settings.scheduler and settings.pass_process else None

    def opened(store: Store) -> None:
        if pool is not None:
            warm_worker(pool, settings, store.database.location)

    try:
        started = start(settings, leadership, opened)
    except Deposed:
        assert leadership is not None  # noqa: S101 - only a leader's writes are fenced
        step_down(leadership.deposed_line())
    if isinstance(started, str):
        if pool is not None:
            pool.shutdown(cancel_futures=True)
        if leadership is not None:
            leadership.resign()
            leadership.close()
        print(f"astraeus-coordinator: {started}", file=sys.stderr)
        return 1
    lock, store, records = started
    if leadership is not None:
        held = leadership
        store.database.on_deposed.append(lambda _error: step_down(held.deposed_line()))
    try:
        return await _serve(settings, store, records, notifier, certificate, pool, leadership)
    finally:
        store.close()
        if lock is not None:
            lock.release()
        if leadership is not None:
            leadership.resign()
            leadership.close()


def _advertised(settings: Settings) -> str | None:
    """The serving address clients are sent to, when `advertise_url` is not given; None while
    the port is still to be chosen (`--listen HOST:0`)."""
    return f"{settings.scheme}://{settings.host}:{settings.port}" if settings.port else None


async def _serve(
    settings: Settings,
    store: Store,
    records: MachineRecords,
    notifier: Notifier,
    certificate: ServerCertificate | None,
    pool: ProcessPoolExecutor | None = None,
    leadership: Leadership | None = None,
) -> int:
    """Serve until SIGTERM or SIGINT: then stop listening, give requests in flight
    `SHUTDOWN_SECONDS`, stop the scheduler between transactions, and return. A leader
    (`leadership`) also steps down if its lease runs out unrenewed."""
    app = create_app(settings, store=store, clock=SystemClock(), records=records, pass_pool=pool)
    runner = web.AppRunner(
        app, access_log=None, shutdown_timeout=SHUTDOWN_SECONDS, max_line_size=MAX_REQUEST_LINE
    )
    await runner.setup()
    context = certificate.context if certificate is not None else None
    site = web.TCPSite(runner, settings.host, settings.port, ssl_context=context)
    await site.start()
    address = _address(runner, settings)
    log.info("listening on %s, database %s", address, shown_database(settings))
    if leadership is not None and leadership.advertise is None:
        leadership.advertise = address  # written in the lease row at the next renewal
    if certificate is None and not settings.loopback:
        log.warning(
            "serving plain HTTP on %s (allow_plain_http): tokens cross the network in clear "
            "text; give tls_cert and tls_key",
            settings.listen,
        )
    print(f"astraeus-coordinator: listening on {address}", file=sys.stderr, flush=True)
    notifier.notify("READY=1\nSTATUS=listening")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    background = []
    if certificate is not None:
        loop.add_signal_handler(signal.SIGHUP, certificate.reload, "SIGHUP")
        if settings.tls_reload_seconds:
            background.append(asyncio.create_task(certificate.watch(settings.tls_reload_seconds)))
    interval = notifier.watchdog_seconds
    if interval:
        background.append(asyncio.create_task(_watchdog(notifier, interval / 2)))
    if leadership is not None:
        background.append(asyncio.create_task(_lease_watch(leadership)))
    await stop.wait()
    notifier.stopping()
    log.info("stopping: no new requests; finishing those in flight")
    for task in background:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    await runner.cleanup()
    return 0


def _address(runner: web.AppRunner, settings: Settings) -> str:
    """`https://127.0.0.1:8470`: the scheme and the real port (when --listen asked for port 0)."""
    port = runner.addresses[0][1] if runner.addresses else settings.port
    return f"{settings.scheme}://{settings.host}:{port}"


async def _lease_watch(leadership: Leadership) -> None:
    """Step down once the lease has run out unrenewed, even while a renewal hangs on a
    connection that a partition left open (the renewing thread cannot say so then)."""
    while True:
        await asyncio.sleep(min(0.5, leadership.lease_seconds / 6))
        if leadership.lease_left() >= 0:
            continue
        line = f"lease lost: not renewed for {leadership.lease_seconds:g} s; stepping down"
        with contextlib.suppress(Exception):  # who leads now, if the database says at once
            line = await asyncio.wait_for(asyncio.to_thread(leadership.expired_line), 1.0)
        step_down(line)


async def _watchdog(notifier: Notifier, interval: float) -> None:
    """Ping from the event loop itself, so a stuck loop stops the pings and systemd restarts us."""
    while True:
        notifier.watchdog()
        await asyncio.sleep(interval)
