"""The coordinator's settings: defaults, then the TOML file, then `ASTRAEUS_*`, then flags."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from astraeus.shared.settings import (
    FLAG,
    PATH,
    TEXT,
    Rule,
    SettingsError,
    gather,
    seconds,
    whole,
)
from astraeus.shared.settings import (
    default_state_dir as shared_state_dir,
)

DB_FILE = "astraeus.db"
UNSET = Path()
"""`db` left at this means `<state_dir>/astraeus.db`."""


STATE_NAME = "astraeus"
"""The unit's `StateDirectory=`: `/var/lib/astraeus`."""


def default_state_dir(
    environ: Mapping[str, str] | None = None, *, root: bool | None = None
) -> Path:
    """systemd's `$STATE_DIRECTORY`; else as root `/var/lib/astraeus`, the unit's (so
    `astraeus-coordinator token create` by hand finds its database); else
    `$XDG_DATA_HOME/astraeus` (`~/.local/share/astraeus`): never the working directory. A
    root install made before (`/root/.local/share/astraeus`) is kept where it exists."""
    env = os.environ if environ is None else environ
    as_root = os.geteuid() == 0 if root is None else root
    home = Path(env.get("HOME") or Path.home())
    user_base = Path(env.get("XDG_DATA_HOME") or home / ".local" / "share")
    legacy = user_base / STATE_NAME if as_root else None
    return shared_state_dir(STATE_NAME, env, root=as_root, user_base=user_base, legacy=legacy)


def short_hostname() -> str:
    """This host's name up to its first dot."""
    return socket.gethostname().split(".")[0] or "astraeus"


@dataclass(frozen=True)
class PortRange:
    first: int
    last: int

    def ports(self) -> range:
        return range(self.first, self.last + 1)


def parse_range(text: str) -> PortRange:
    """`29500-30499` (Kubernetes' `service-node-port-range` form); ValueError otherwise."""
    first, sep, last = text.strip().partition("-")
    if not sep or not first.isdigit() or not last.isdigit():
        raise ValueError(text)
    low, high = int(first), int(last)
    if not 1 <= low <= high <= 65535:
        raise ValueError(text)
    return PortRange(low, high)


@dataclass(frozen=True)
class Settings:
    """Everything the coordinator can be told. Durations are seconds."""

    db: Path = UNSET
    """The SQLite file; unset: `<state_dir>/astraeus.db`. Unused with `database_url`."""
    database_url: str = ""
    """`postgresql://...` (PostgreSQL 13 or newer): the database on that server instead of the
    SQLite file. Empty: the SQLite file (the default)."""
    listen: str = "127.0.0.1:8470"
    advertise_url: str = ""
    """With `database_url`: the address clients should use to reach this coordinator while it
    leads (written in the lease row; standbys send clients there). Empty: the serving address
    (`scheme://listen`), which is only right where clients reach that very address."""
    leader_lease_seconds: float = 6.0
    """With `database_url`: how long a leader's lease lasts unless renewed (every third of
    it). A leader that cannot renew it for this long steps down; a standby takes over once it
    has run out (at once when the leader's process or host is gone)."""
    state_dir: Path = field(default_factory=default_state_dir)
    """The database (unless `db` says otherwise) and the first admin token."""
    tls_cert: Path | None = None
    """PEM certificate chain to serve HTTPS with; reloaded on SIGHUP and when the file changes."""
    tls_key: Path | None = None
    """The certificate's PEM private key."""
    tls_reload_seconds: float = 60.0
    """How often the certificate files are checked for a renewal."""
    allow_plain_http: bool = False
    """Serve plain HTTP on a non-loopback address (tokens then cross the network in clear)."""
    down_after_seconds: float = 30.0
    """A machine whose reports stop for this long is Down."""
    lost_after_seconds: float = 300.0
    """A task on a silent machine becomes Lost this long after the machine's last report; until
    then it is shown with `machine_silent_since` and keeps running (Slurm's `SlurmdTimeout` and
    Kubernetes' eviction wait 5 minutes too)."""
    report_interval_seconds: float = 5.0
    """Told to agents in every reply."""
    max_report_delay_seconds: float = 0.25
    """Load shedding: while the coordinator runs further behind than this (its event loop, or
    the writer thread a report's write would wait on), reports are refused at once with 503 and
    `Retry-After` (the report interval) instead of queueing until agents time out. A refused
    report still counts as heard: its machine is not shown Down."""
    pass_debounce_seconds: float = 0.05
    """A change waits this long for more changes before the scheduler pass it triggers."""
    pass_interval_seconds: float = 5.0
    """A pass runs at least this often, for patience clocks and Down machines."""
    max_body_bytes: int = 4 * 1024 * 1024
    log_cap_bytes: int = 1024 * 1024
    """Log kept per task; the oldest chunks go first."""
    max_pending_evaluations: int = 500
    """Waiting runs explained per pass; later ones keep their previous explanation."""
    max_pass_seconds: float = 2.0
    """A pass decides for at most this long, commits, and the next one goes on."""
    pass_process: bool = True
    """Compute scheduler passes in a separate process, so reports keep a core of their own."""
    scheduler: bool = True
    """Run the scheduler loop in the background (tests drive passes by hand)."""
    cluster_name: str = field(default_factory=short_hostname)
    """The name users see: `finetune submitted to <cluster_name>: ...`."""
    console_url: str = ""
    """Where users open the console; empty: the host the caller reached, `http(s)://<Host>/console/`
    (set it behind a proxy). A run's page is `<console_url>jobs/<cluster_name>/<run>`."""
    rendezvous_ports: str = "29500-30499"
    """`FIRST-LAST`: the ports a run's worker 0 may be given for its rendezvous (`MASTER_PORT`);
    no two live tasks of one machine hold the same one. Keep it below the kernel's ephemeral
    range (`net.ipv4.ip_local_port_range`, 32768-60999 by default)."""
    fair_share_half_life_seconds: float = 604800.0
    """Fair share: a workspace's GPU usage counts half as much this long later (7 days, as
    Slurm's `PriorityDecayHalfLife`)."""
    preemption: str = "off"
    """`off`: no run is ever stopped for another. `priority`: a waiting run that would start if
    lower-priority runs were stopped preempts the cheapest set of them (`preemptible: false`
    runs never), which goes back to the queue."""
    preemption_max_per_minute: int = 6
    """At most this many runs preempt others in any minute, cluster-wide (each stopping as many
    runs as it needs): a storm of preemptions, each undoing the last, is held to a few a minute
    while one urgent run still starts at once. 0: none."""
    preemption_grace_seconds: float = 30.0
    """Between SIGTERM and SIGKILL for a preempted run's workers: time to write a checkpoint
    (Slurm's `GraceTime`; Kubernetes' 30 s termination grace)."""
    fair_share: bool = True
    """Order runs of equal priority by their workspace's decayed usage over its weight; false:
    by submission alone (first come, first served), weights and usage ignored. Usage is
    counted and shown either way."""
    backfill: bool = True
    """A run behind a head that holds machines may use them when its time limit ends before
    they free up; false: held machines wait for their head alone."""
    access_labels: tuple[str, ...] = ("pool",)
    """Labels that grant access: only admins set them (API, or with the agent's token); what an
    agent reports for them is ignored. `pool` is always one; a comma list adds others."""

    def __post_init__(self) -> None:
        if self.db == UNSET:
            object.__setattr__(self, "db", self.state_dir / DB_FILE)

    @property
    def database(self) -> Path | str:
        """What the store opens: the PostgreSQL URL when one is given, else the SQLite file."""
        return self.database_url or self.db

    @property
    def port_range(self) -> PortRange:
        return parse_range(self.rendezvous_ports)

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    @property
    def loopback(self) -> bool:
        """True when only this machine can reach the listen address."""
        host = self.host.strip("[]")
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False

    @property
    def host(self) -> str:
        return self.listen.rpartition(":")[0] or "127.0.0.1"

    @property
    def port(self) -> int:
        return int(self.listen.rpartition(":")[2])


SESSION_ATTRS = ("any", "read-write", "read-only", "primary", "standby", "prefer-standby")
"""libpq's values of `target_session_attrs` (PostgreSQL 14 and newer)."""

WRITERS = ("any", "read-write", "primary")
"""Those a coordinator may ask for: it writes (`any` with one host, as without the parameter)."""


def _database_url(raw: object) -> str:
    """A libpq URL of PostgreSQL (`postgresql://` or `postgres://`); empty: none. It may list
    several hosts, each with its port (`h1:5432,h2:5432`), with `target_session_attrs=read-write`
    so the coordinator follows whichever is the primary (docs/operator.md). Checked here, so a
    mistake is named at start, not found as "cannot reach the database server". The messages
    never repeat the URL: it may hold a password."""
    text = str(raw).strip()
    if text and not text.startswith(("postgresql://", "postgres://")):
        raise ValueError(
            f"{text!r} is not a postgresql:// URL, e.g."
            " postgresql://astraeus@db.example:5432/astraeus (leave it unset for the SQLite file)"
        )
    if text:
        _check_conninfo(text)  # first: a misspelt parameter is the mistake to name
        _check_hosts(text)
    return text


def _check_hosts(url: str) -> None:
    """Each host of the URL's host list has a port from 1 to 65535, if it names one, and the
    session kind asked for (`target_session_attrs`) is one libpq knows."""
    _, hosts, query = _url_parts(url)
    listed = hosts.split(",") if hosts else []
    for number, host in enumerate(listed, start=1):
        name, port = _host_port(host)
        if not name and len(listed) > 1:
            raise ValueError(f"host {number} of the URL's host list is empty")
        if port and not (port.isdigit() and 1 <= int(port) <= 65535):
            raise ValueError(
                f"the port {port!r} of host {number} ({name}) is not a port number from 1 to 65535"
            )
    attrs = [
        part.partition("=")[2]
        for part in (query.split("&") if query else [])
        if part.partition("=")[0] == "target_session_attrs"
    ]
    for value in attrs:
        if value not in SESSION_ATTRS:
            raise ValueError(
                f"target_session_attrs={value!r} is not one of {', '.join(SESSION_ATTRS)}"
                " (read-write: the primary, whichever host it is)"
            )
        if value not in WRITERS:
            raise ValueError(
                f"target_session_attrs={value!r} would take a server that refuses writes; the"
                " coordinator writes: target_session_attrs=read-write"
            )
    if len(listed) > 1 and not set(attrs) & {"read-write", "primary"}:
        raise ValueError(
            f"the URL lists {len(listed)} hosts without target_session_attrs=read-write: libpq"
            " would keep the first that answers, a standby too; add"
            " ?target_session_attrs=read-write so the coordinator follows the primary"
        )


def _url_parts(url: str) -> tuple[str, str, str]:
    """A libpq URL's user part (`user:password`, or ""), host list and query, read by hand:
    a host list is no URL's host part for `urlsplit`."""
    rest = url.partition("://")[2]
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    userinfo, _, hosts = rest[:cut].rpartition("@")
    return userinfo, hosts, rest[cut:].partition("?")[2]


def _host_port(host: str) -> tuple[str, str]:
    """`h:5432` or `[::1]:5432` as (host, port); the port is "" where none is named."""
    if host.startswith("["):
        name, _, port = host[1:].partition("]")
        return name, port.removeprefix(":")
    name, _, port = host.partition(":")
    return name, port


def _check_conninfo(url: str) -> None:
    """libpq's own reading of the URL (through psycopg, when installed: without it the store
    says how to install it), which knows every parameter name."""
    try:
        from psycopg import Error
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        return
    try:
        conninfo_to_dict(url)
    except Error as error:
        message = str(error).strip()
        for secret in _passwords(url):
            message = message.replace(secret, "***")
        raise ValueError(f"libpq cannot read the URL: {message}") from None


def _passwords(url: str) -> list[str]:
    """The password texts of the URL (its user part's, a `password=` parameter's), to keep
    out of messages."""
    userinfo, _, query = _url_parts(url)
    found = [userinfo.partition(":")[2]]
    found += [part[len("password=") :] for part in query.split("&") if part.startswith("password=")]
    return [secret for secret in found if secret]


def _advertise_url(raw: object) -> str:
    """An http(s) URL without a query or a fragment (its trailing slash dropped); empty: the
    serving address."""
    text = str(raw).strip()
    if not text:
        return ""
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or "#" in text:
        raise ValueError(
            f"{text!r} is not an http(s) URL without a query or fragment,"
            " e.g. https://coordinator-a.example:8470"
        )
    return text.rstrip("/")


MIN_LEASE_SECONDS = 1.0
"""A shorter lease would have a busy leader step down for a renewal a few hundred ms late."""


def _lease(raw: object) -> float:
    value: float = seconds().parse(raw)
    if value < MIN_LEASE_SECONDS:
        raise ValueError(f"{raw!r} is less than {MIN_LEASE_SECONDS:g} second")
    return value


PREEMPTION_MODES = ("off", "priority")


def _preemption(raw: object) -> str:
    """`off` or `priority`."""
    text = str(raw).strip().lower() if isinstance(raw, str) else raw
    if text not in PREEMPTION_MODES:
        raise ValueError(f"{raw!r} is not one of: {', '.join(PREEMPTION_MODES)}")
    return str(text)


def _label_list(raw: object) -> tuple[str, ...]:
    """`pool` and the labels listed (a comma list, or a TOML array), each once, in order."""
    items = raw if isinstance(raw, list | tuple) else str(raw).split(",")
    names = [str(item).strip() for item in items]
    if any(not name for name in names if len(names) > 1):
        raise ValueError(f"{raw!r} is not a comma-separated list of label names")
    return tuple(dict.fromkeys(["pool", *(name for name in names if name)]))


SCHEMA: dict[str, Rule] = {
    "db": PATH,
    "database_url": Rule(_database_url),
    "listen": TEXT,
    "advertise_url": Rule(_advertise_url),
    "leader_lease_seconds": Rule(_lease),
    "state_dir": PATH,
    "tls_cert": PATH,
    "tls_key": PATH,
    "tls_reload_seconds": seconds(zero=True),
    "allow_plain_http": FLAG,
    "down_after_seconds": seconds(),
    "lost_after_seconds": seconds(zero=True),
    "report_interval_seconds": seconds(),
    "max_report_delay_seconds": seconds(zero=True),
    "pass_debounce_seconds": seconds(zero=True),
    "pass_interval_seconds": seconds(),
    "max_body_bytes": whole(minimum=1),
    "log_cap_bytes": whole(),
    "max_pending_evaluations": whole(),
    "max_pass_seconds": seconds(zero=True),
    "pass_process": FLAG,
    "scheduler": FLAG,
    "cluster_name": TEXT,
    "console_url": TEXT,
    "rendezvous_ports": TEXT,
    "access_labels": Rule(_label_list),
    "fair_share_half_life_seconds": seconds(),
    "preemption": Rule(_preemption),
    "preemption_max_per_minute": whole(),
    "preemption_grace_seconds": seconds(zero=True),
    "fair_share": FLAG,
    "backfill": FLAG,
}
"""Every setting and its rule (`shared/settings.py`, the same rules as the agent's). Where 0
is allowed it means none: only SIGHUP reloads the certificate, Lost as soon as silent, no
report refused for overload, no debounce, one run per pass, no log kept."""


def _check_listen(settings: Settings) -> Settings:
    _host, sep, port = settings.listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise SettingsError(f"listen: {settings.listen!r} is not HOST:PORT, e.g. 0.0.0.0:8470")
    if not settings.cluster_name.strip():
        raise SettingsError("cluster_name: must not be empty")
    if (settings.tls_cert is None) != (settings.tls_key is None):
        raise SettingsError("tls_cert and tls_key: give both, or neither")
    if not settings.tls and not settings.loopback and not settings.allow_plain_http:
        raise SettingsError(
            f"listen: {settings.listen} is reachable from other machines and would serve plain "
            "HTTP; give tls_cert and tls_key (--tls-cert, --tls-key), or set "
            "allow_plain_http = true (--allow-plain-http) to send tokens in clear text"
        )
    try:
        parse_range(settings.rendezvous_ports)
    except ValueError:
        raise SettingsError(
            f"rendezvous_ports: {settings.rendezvous_ports!r} is not FIRST-LAST with"
            " 1 <= FIRST <= LAST <= 65535, e.g. 29500-30499"
        ) from None
    url = settings.console_url
    if url and (not url.startswith(("http://", "https://")) or "#" in url):
        raise SettingsError(
            f"console_url: {url!r} is not an http(s) URL without a fragment, "
            "e.g. https://console.example/"
        )
    return settings


def load(
    *,
    config: Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, object] | None = None,
) -> Settings:
    """Settings from the file, the environment and flags, later sources winning."""
    environ = os.environ if env is None else env
    values: dict[str, Any] = {"state_dir": default_state_dir(environ)}
    values |= gather(SCHEMA, config=config, environ=environ, flags=overrides or {})
    return _check_listen(Settings(**values))
