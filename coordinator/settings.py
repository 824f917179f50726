"""The coordinator's settings: defaults, then the TOML file, then `ASTRAEUS_*`, then flags."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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

DB_FILE = "astraeus.db"
UNSET = Path()
"""`db` left at this means `<state_dir>/astraeus.db`."""


def default_state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """systemd's `$STATE_DIRECTORY`, else `$XDG_DATA_HOME/astraeus` (`~/.local/share/astraeus`):
    never the working directory."""
    env = os.environ if environ is None else environ
    if env.get("STATE_DIRECTORY"):
        return Path(env["STATE_DIRECTORY"].split(":")[0])
    base = env.get("XDG_DATA_HOME") or str(Path(env.get("HOME") or Path.home()) / ".local/share")
    return Path(base) / "astraeus"


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


def _database_url(raw: object) -> str:
    """A libpq URL of PostgreSQL (`postgresql://` or `postgres://`); empty: none."""
    text = str(raw).strip()
    if text and not text.startswith(("postgresql://", "postgres://")):
        raise ValueError(
            f"{text!r} is not a postgresql:// URL, e.g."
            " postgresql://astraeus@db.example:5432/astraeus (leave it unset for the SQLite file)"
        )
    return text


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
