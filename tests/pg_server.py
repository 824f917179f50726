"""A private PostgreSQL server for the tests, and a TCP proxy that can cut the way to it.

Debian's binaries (`/usr/lib/postgresql/<version>/bin`, or `initdb` on PATH): `initdb` in a
temporary folder, run as an unprivileged user when the tests run as root (initdb refuses root;
here and in CI they do), listening on 127.0.0.1 only at a free port, its unix socket in the
same folder; fsync off (a test server's data need not survive a power cut). One server per
test process (`tests/conftest.py`), one fresh database per test (`create_database`).

`start_pair` makes a primary and its synchronous streaming replica (`pg_basebackup -R`), for
PostgreSQL's own failover: the primary crashed (`Pair.crash_primary`), the replica promoted
(`Pair.promote`), reached all along through one multi-host URL (`Pair.url`).
"""

from __future__ import annotations

import atexit
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
from pathlib import Path

from helpers import hold_port, until

USER = "astraeus"
"""The server's superuser (trust authentication, loopback only)."""

UNPRIVILEGED = "nobody"
"""Who runs the server when the tests run as root."""


BIN_DIR = "ASTRAEUS_POSTGRESQL_BIN"
"""Where initdb and pg_ctl are, if not Debian's newest `/usr/lib/postgresql/*/bin` or PATH."""


def _bin_dir() -> Path | None:
    if os.environ.get(BIN_DIR):
        given = Path(os.environ[BIN_DIR])
        return given if (given / "initdb").exists() else None
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda path: int(Path(path).parts[-3]) if Path(path).parts[-3].isdigit() else 0,
    )
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


class Server:
    """A started server; `stop` ends it and removes its folder."""

    def __init__(self, root: Path, bin_dir: Path, port: int, as_user: list[str]) -> None:
        self.root = root
        self.bin_dir = bin_dir
        self.port = port
        self._as_user = as_user
        self._count = 0
        self._lock = threading.Lock()
        self.held: socket.socket | None = None

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def admin(self, sql: str) -> None:
        """Run `sql` as the superuser on the `postgres` database (autocommit)."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql.encode())

    def create_database(self, prefix: str = "t") -> str:
        """A new empty database; its URL."""
        with self._lock:
            self._count += 1
            name = f"{prefix}_{os.getpid()}_{self._count}"
        self.admin(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        subprocess.run(
            [*self._as_user, str(self.bin_dir / "pg_ctl"), "-D", str(self.root / "data"),
             "-m", "immediate", "stop"],
            capture_output=True, check=False, timeout=60,
        )  # fmt: skip
        shutil.rmtree(self.root, ignore_errors=True)
        if self.held is not None:
            self.held.close()


def start(options: str = "") -> Server | str:
    """A started server, or why none could be started (one line). `options`: more `-c name=value`
    settings for it, after (so over) the test defaults."""
    prepared = _prepare()
    if isinstance(prepared, str):
        return prepared
    root, bin_dir, as_user = prepared
    data = root / "data"
    made = subprocess.run(
        [*as_user, str(bin_dir / "initdb"), "-D", str(data), "-U", USER, "--auth=trust",
         "-E", "UTF8", "--no-sync", "--no-instructions"],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    if made.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        last = (made.stderr.strip() or made.stdout.strip()).splitlines()[-1:]
        return f"initdb failed: {' '.join(last)}"
    return _launch(root, bin_dir, as_user, options)


def _prepare() -> tuple[Path, Path, list[str]] | str:
    """A new private folder for a server (the server's own user's), the binaries' folder and
    the command prefix that runs them as that user; or why no server can be started."""
    bin_dir = _bin_dir()
    if bin_dir is None:
        return "PostgreSQL's initdb is not installed (Debian: apt-get install postgresql)"
    try:
        import psycopg  # noqa: F401 - the driver the store uses
    except ImportError:
        return "psycopg is not installed (pip install 'psycopg[binary]')"
    root = Path(tempfile.mkdtemp(prefix="astraeus-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        runuser = shutil.which("runuser")
        if runuser is None:
            shutil.rmtree(root)
            return "running as root without runuser to start PostgreSQL as another user"
        entry = pwd.getpwnam(UNPRIVILEGED)
        os.chown(root, entry.pw_uid, entry.pw_gid)  # 0700 (mkdtemp), now the server's own
        as_user = [runuser, "-u", UNPRIVILEGED, "--"]
    return root, bin_dir, as_user


def _launch(root: Path, bin_dir: Path, as_user: list[str], options: str = "") -> Server | str:
    """Start the server of the data folder `root/data` on a free loopback port."""
    data = root / "data"
    # Held while the server lives: PostgreSQL binds with SO_REUSEADDR, which the hold allows,
    # and nothing else can take the port meanwhile.
    held = hold_port()
    port = int(held.getsockname()[1])
    options = (
        f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={root}"
        " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        " -c max_connections=200 -c shared_buffers=32MB"
    ) + (f" {options}" if options else "")
    started = subprocess.run(
        [*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log"),
         "-o", options, "-w", "-t", "60", "start"],
        capture_output=True, text=True, check=False, timeout=90,
    )  # fmt: skip
    server = Server(root, bin_dir, port, as_user)
    server.held = held
    if started.returncode != 0:
        log = root / "server.log"
        text = log.read_text() if log.exists() else started.stderr
        server.stop()
        return f"the server did not start: {' '.join(text.strip().splitlines()[-1:])}"
    return server


_SHARED: list[Server] = []


def shared() -> Server:
    """This process's server for `ENGINE=postgresql` runs of the suite (started on first use,
    stopped when the process exits)."""
    if not _SHARED:
        started = start()
        if isinstance(started, str):
            raise RuntimeError(f"{ENGINE}=postgresql but no PostgreSQL server: {started}")
        atexit.register(started.stop)
        _SHARED.append(started)
    return _SHARED[0]


ENGINE = "ASTRAEUS_TEST_ENGINE"
"""`postgresql`: every coordinator the tests in tests/coordinator make (`make_cluster`) keeps
its state on PostgreSQL, not only the store's own tests. For a developer's run of the whole
folder on PostgreSQL; CI runs the store's tests on both engines and the rest on SQLite. Six tests
fail there by design: four use SQLite's own page limit for a full disk (`test_storage.py`), and
two restart a coordinator on "the same file" by its folder (`test_partition.py`,
`test_poison.py`), which this switch gives a new database."""


# -- A primary and its streaming replica ------------------------------------------------------

REPLICA_NAME = "astraeus_replica"
"""The replica's `application_name` on its replication connection: the primary's
`synchronous_standby_names` names it, so a commit the primary acknowledged is on the replica."""

PRIMARY_OPTIONS = (
    "-c wal_level=replica -c max_wal_senders=4 -c wal_keep_size=64MB"
    f" -c synchronous_standby_names={REPLICA_NAME} -c synchronous_commit=on"
)
"""What makes a server a primary whose commits wait for the replica (over `start`'s defaults,
which turn synchronous commit off). Given on its command line, not in its configuration file,
so the replica copied from it does not wait for a standby of its own once promoted."""

REPLICATION_HBA = "host replication all 127.0.0.1/32 trust\n"
"""The primary's one replication entry: loopback only, as every connection of these servers."""


class Pair:
    """A primary and a streaming replica of it, each a `Server` on its own port and folder;
    `url` reaches whichever of the two takes writes (libpq's multi-host URL)."""

    def __init__(self, primary: Server, replica: Server) -> None:
        self.primary = primary
        self.replica = replica

    def url(self, database: str = "postgres") -> str:
        """Both hosts, primary first; libpq takes the first that accepts writes."""
        return (
            f"postgresql://{USER}@127.0.0.1:{self.primary.port},127.0.0.1:{self.replica.port}"
            f"/{database}?target_session_attrs=read-write"
        )

    def create_database(self, prefix: str = "t") -> str:
        """A new empty database (made on the primary, replicated); its multi-host URL."""
        name = self.primary.create_database(prefix).rpartition("/")[2]
        self.wait_replayed()
        return self.url(name)

    def sync_state(self) -> str | None:
        """The replica's state as the primary sees it (`sync` once commits wait for it)."""
        import psycopg

        with psycopg.connect(self.primary.url(), autocommit=True, connect_timeout=10) as conn:
            row = conn.execute(
                "SELECT sync_state FROM pg_stat_replication WHERE application_name = %s",
                (REPLICA_NAME,),
            ).fetchone()
        return None if row is None else str(row[0])

    def wait_replayed(self) -> None:
        """Until the replica has replayed everything the primary has written so far."""
        import psycopg

        with psycopg.connect(self.primary.url(), autocommit=True, connect_timeout=10) as conn:
            target = conn.execute("SELECT pg_current_wal_lsn()").fetchone()
        assert target is not None
        with psycopg.connect(self.replica.url(), autocommit=True, connect_timeout=10) as conn:
            until(
                "the replica to replay the primary's WAL",
                lambda: conn.execute(
                    "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (str(target[0]),)
                ).fetchone()[0],
            )

    def crash_primary(self) -> None:
        """Stop the primary as a crash does (`pg_ctl stop -m immediate`: no shutdown
        checkpoint, every session cut). Its port stays held: connections to it are refused."""
        stop = subprocess.run(
            [*self.primary._as_user, str(self.primary.bin_dir / "pg_ctl"), "-D",
             str(self.primary.root / "data"), "-m", "immediate", "-w", "stop"],
            capture_output=True, text=True, check=False, timeout=60,
        )  # fmt: skip
        if stop.returncode != 0:
            raise RuntimeError(f"pg_ctl stop of the primary failed: {stop.stderr.strip()}")

    def promote(self) -> None:
        """Promote the replica (`pg_ctl promote`), and wait until it takes writes."""
        promoted = subprocess.run(
            [*self.replica._as_user, str(self.replica.bin_dir / "pg_ctl"), "-D",
             str(self.replica.root / "data"), "-w", "-t", "60", "promote"],
            capture_output=True, text=True, check=False, timeout=90,
        )  # fmt: skip
        if promoted.returncode != 0:
            raise RuntimeError(f"pg_ctl promote failed: {promoted.stderr.strip()}")
        import psycopg

        with psycopg.connect(self.replica.url(), autocommit=True, connect_timeout=10) as conn:
            until(
                "the promoted replica to leave recovery",
                lambda: not conn.execute("SELECT pg_is_in_recovery()").fetchone()[0],
            )

    def stop(self) -> None:
        self.replica.stop()
        self.primary.stop()


def start_pair() -> Pair | str:
    """A primary (`PRIMARY_OPTIONS`) and a replica made from it by `pg_basebackup -R`
    (`standby.signal`, and `primary_conninfo` naming `REPLICA_NAME`), streaming and
    synchronous; or why none could be started (one line)."""
    primary = start(PRIMARY_OPTIONS)
    if isinstance(primary, str):
        return primary
    try:
        replica = _replica_of(primary)
    except BaseException:
        primary.stop()
        raise
    if isinstance(replica, str):
        primary.stop()
        return replica
    pair = Pair(primary, replica)
    try:
        until("the replica to stream synchronously", lambda: pair.sync_state() == "sync")
    except BaseException:
        pair.stop()
        raise
    return pair


def _replica_of(primary: Server) -> Server | str:
    hba = primary.root / "data" / "pg_hba.conf"
    if REPLICATION_HBA not in hba.read_text():
        with hba.open("a") as out:
            out.write(REPLICATION_HBA)
        primary.admin("SELECT pg_reload_conf()")
    prepared = _prepare()
    if isinstance(prepared, str):
        return prepared
    root, bin_dir, as_user = prepared
    conninfo = f"host=127.0.0.1 port={primary.port} user={USER} application_name={REPLICA_NAME}"
    copied = subprocess.run(
        [*as_user, str(bin_dir / "pg_basebackup"), "-D", str(root / "data"), "-d", conninfo,
         "-X", "stream", "-c", "fast", "-R", "--no-sync"],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    if copied.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        last = (copied.stderr.strip() or copied.stdout.strip()).splitlines()[-1:]
        return f"pg_basebackup failed: {' '.join(last)}"
    written = (root / "data" / "postgresql.auto.conf").read_text()
    if f"application_name={REPLICA_NAME}" not in written:
        shutil.rmtree(root, ignore_errors=True)
        return f"pg_basebackup -R wrote no application_name in primary_conninfo: {written!r}"
    return _launch(root, bin_dir, as_user)
