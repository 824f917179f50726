"""A private PostgreSQL server for the tests, and a TCP proxy that can cut the way to it.

Debian's binaries (`/usr/lib/postgresql/<version>/bin`, or `initdb` on PATH): `initdb` in a
temporary folder, run as an unprivileged user when the tests run as root (initdb refuses root;
here and in CI they do), listening on 127.0.0.1 only at a free port, its unix socket in the
same folder; fsync off (a test server's data need not survive a power cut). One server per
test process (`tests/conftest.py`), one fresh database per test (`create_database`).
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
from pathlib import Path

from helpers import hold_port

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


def start() -> Server | str:
    """A started server, or why none could be started (one line)."""
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
    # Held while the server lives: PostgreSQL binds with SO_REUSEADDR, which the hold allows,
    # and nothing else can take the port meanwhile.
    held = hold_port()
    port = int(held.getsockname()[1])
    options = (
        f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={root}"
        " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        " -c max_connections=200 -c shared_buffers=32MB"
    )
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


class Proxy:
    """A TCP proxy on 127.0.0.1 to the server: `cut` closes every connection through it and
    stops listening (a client then meets `connection refused`); `heal` listens again on the
    same port."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = 0
        self._server: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.heal()

    def url(self, database: str) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    @property
    def listening(self) -> bool:
        return self._server is not None

    def heal(self) -> None:
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(64)
        self.port = int(server.getsockname()[1])
        self._server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return  # closed by `cut`
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            self._close(source, sink)

    def _close(self, *sockets: socket.socket) -> None:
        with self._lock:
            for sock in sockets:
                self._open.discard(sock)
                sock.close()

    def cut(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        with self._lock:
            found = list(self._open)
        for sock in found:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._close(*found)
