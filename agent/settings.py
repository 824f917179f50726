"""The agent's settings, for every command (`run`, `inspect`, `serve`): one schema, then
defaults, then validation. Sources and their order, and the rules for numbers, flags and paths,
are the coordinator's too (`shared/settings.py`): the TOML file (`--config` or
`ASTRAEUS_CONFIG`), then `ASTRAEUS_<KEY>` variables, then the command line, each later one
winning."""

import argparse
import ipaddress
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from astraeus.agent.health.signals import HealthPolicy
from astraeus.shared.coordinators import parse_coordinators
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

BACKEND = re.compile(r"^(auto|nvml|amdsmi|intel|none|fake:.+)$")
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 7641
SCAN_SECONDS = 10.0
UDEV_SOURCES = ("udev", "kernel")


@dataclass(frozen=True, kw_only=True)
class MachineSettings:
    """What every command reads: the machine, and how to discover it."""

    name: str = ""
    """The machine's name; empty: the fake machine's name with `fake:`, else the host name."""
    state_dir: Path
    """Where the agent keeps its tasks, their logs and what it knows of its GPUs."""
    backend: str = "auto"
    sysfs_root: Path = Path("/sys")
    proc_root: Path = Path("/proc")
    dev_root: Path = Path("/dev")
    labels: tuple[tuple[str, str], ...] = ()
    drives: tuple[tuple[str, str], ...] = ()
    """Drives on this machine: (name, path)."""
    network_drives: tuple[tuple[str, str], ...] = ()
    """Network drives this machine reaches: (name, path where it is mounted)."""
    health: HealthPolicy = field(default_factory=HealthPolicy)
    """The `[health]` table of the TOML file: GPU and port health thresholds."""


@dataclass(frozen=True, kw_only=True)
class Settings(MachineSettings):
    """`run`: the machine, and the coordinator it reports to and the workers it starts."""

    coordinator: str
    """The coordinator's URL, or every coordinator's, comma-separated (checked, each once): the
    agent reports to whichever leads (`shared/coordinators.py`)."""
    token_file: Path
    report_interval_seconds: float | None = None
    stop_grace_seconds: float = 30.0
    backoff_max_seconds: float = 5.0
    ca_file: Path | None = None
    """The CA that signed the coordinator's certificate; None: the system's CA store."""
    worker_user: str = "dynamic"
    """`dynamic` (a uid of its own per task), or one user's name or uid for every worker."""
    worker_uids: str = ""
    """`FIRST-LAST`, the uids `dynamic` picks from; empty: 1879048192-1879113727."""
    work_root: Path | None = None
    """Where the tasks' working directories go; None: `<state_dir>-work`."""
    allow_root_workers: bool = False
    advertise_address: str = ""
    """The IP address other machines reach this one at; empty: the source address of this
    machine's route to the coordinator (as kubelet picks its node IP)."""
    worker_env_passthrough: tuple[str, ...] = ()
    allow_plain_http: bool = False
    """Send the token over plain `http://` to a coordinator on another machine."""
    """Variables of the agent's environment that plain workers get too; beyond these a worker
    starts with only `PATH`, `LANG` and `LC_*` of it (docs/security.md)."""


@dataclass(frozen=True, kw_only=True)
class ServeSettings(MachineSettings):
    """`serve`: the machine, and where its local API listens."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    scan_seconds: float = SCAN_SECONDS
    udev_source: str = "udev"
    """`kernel`: in a container that sees the host's kernel events but not its udevd."""


def _backend(raw: Any) -> str:
    if not BACKEND.match(str(raw)):
        raise ValueError(f"{raw!r}; use auto, nvml, amdsmi, intel, none or fake:FILE")
    return str(raw)


def _coordinators(raw: Any) -> str:
    """`URL[,URL…]` (a TOML list too), each checked; kept as one comma-separated string."""
    return ",".join(parse_coordinators(raw))


ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _variable_names(raw: Any) -> tuple[str, ...]:
    """A TOML list of names, or a comma-separated string (a flag or a variable)."""
    names = raw.split(",") if isinstance(raw, str) else raw
    if not isinstance(names, list | tuple):
        raise ValueError(f"{raw!r} is not a list of variable names")
    found = tuple(str(name).strip() for name in names if str(name).strip())
    for name in found:
        if not ENV_NAME.match(name):
            raise ValueError(f"{name!r} is not a variable name")
        if name.startswith("ASTRAEUS_"):
            raise ValueError(f"{name!r} is the agent's own setting; it never reaches a worker")
    return found


def _port(raw: Any) -> int:
    port = whole().parse(raw)
    if port > 65535:
        raise ValueError(f"{raw!r} is not a port (0 to 65535; 0 picks a free one)")
    return int(port)


def _udev_source(raw: Any) -> str:
    if raw not in UDEV_SOURCES:
        raise ValueError(f"{raw!r}; use udev or kernel")
    return str(raw)


MACHINE: dict[str, Rule] = {
    "name": TEXT,
    "state_dir": PATH,
    "backend": Rule(_backend),
    "sysfs_root": PATH,
    "proc_root": PATH,
    "dev_root": PATH,
    "labels": Rule(lambda raw: _labels(raw)),
    "drives": Rule(lambda raw: _drives("drives", raw)),
    "network_drives": Rule(lambda raw: _drives("network_drives", raw)),
    "health": Rule(lambda raw: health_policy(raw)),
}
RUN: dict[str, Rule] = MACHINE | {
    "coordinator": Rule(_coordinators),
    "token_file": PATH,
    "report_interval_seconds": seconds(),
    "stop_grace_seconds": seconds(),
    "backoff_max_seconds": seconds(),
    "ca_file": PATH,
    "worker_user": TEXT,
    "worker_uids": TEXT,
    "work_root": PATH,
    "allow_root_workers": FLAG,
    "advertise_address": Rule(lambda raw: _advertise(raw)),
    "worker_env_passthrough": Rule(_variable_names),
    "allow_plain_http": FLAG,
}
SERVE: dict[str, Rule] = MACHINE | {
    "host": TEXT,
    "port": Rule(_port),
    "scan_seconds": seconds(),
    "udev_source": Rule(_udev_source),
}
SCHEMAS: dict[str, tuple[type[MachineSettings], dict[str, Rule]]] = {
    "run": (Settings, RUN),
    "inspect": (MachineSettings, MACHINE),
    "serve": (ServeSettings, SERVE),
}
KEYS = tuple(f.name for f in fields(Settings))


def _machine_flags(cli: argparse.ArgumentParser) -> None:
    cli.add_argument(
        "--name",
        help="this machine's name (default: the fake machine's name, else the host name)",
    )
    cli.add_argument(
        "--backend", help="auto, nvml, amdsmi, intel, none or fake:FILE (default: auto)"
    )
    cli.add_argument("--sysfs-root", help="where sysfs is mounted (default: /sys)")
    cli.add_argument("--proc-root", help="where procfs is mounted (default: /proc)")
    cli.add_argument("--dev-root", help="where devices are (default: /dev)")
    cli.add_argument(
        "--state-dir",
        "--data-dir",
        dest="state_dir",
        help="where the agent keeps its tasks, their logs and its GPUs' history",
    )
    cli.add_argument(
        "--label",
        action="append",
        dest="labels",
        metavar="KEY=VALUE",
        help="a label this machine reports, e.g. topology.astraeus.io/rack=r1 (repeatable)",
    )
    cli.add_argument(
        "--drive",
        action="append",
        dest="drives",
        metavar="NAME=PATH",
        help="a drive on this machine that runs may mount, e.g. datasets=/mnt/datasets "
        "(repeatable)",
    )
    cli.add_argument(
        "--network-drive",
        action="append",
        dest="network_drives",
        metavar="NAME=PATH",
        help="a network drive mounted here, e.g. shared=/mnt/nfs/shared (repeatable)",
    )
    cli.add_argument("--config", help="a TOML file of settings (ASTRAEUS_CONFIG)")


def _run_flags(cli: argparse.ArgumentParser) -> None:
    cli.add_argument(
        "--coordinator",
        metavar="URL[,URL…]",
        help="the coordinator's URL, e.g. https://coord:8443, or every coordinator's, "
        "comma-separated: the agent reports to whichever leads",
    )
    cli.add_argument("--token-file", help="a file holding this machine's agent token")
    cli.add_argument(
        "--ca-file",
        help="PEM file of the CA that signed the coordinator's certificate "
        "(default: the system's CA store)",
    )
    cli.add_argument(
        "--worker-user",
        help="dynamic (default: a uid of its own per task), or a user name or uid for all",
    )
    cli.add_argument("--work-root", help="where the tasks' working directories go")
    cli.add_argument(
        "--allow-root-workers",
        action="store_true",
        default=None,
        help="let workers run as root (where worker_user is root or the agent cannot switch)",
    )
    cli.add_argument(
        "--allow-plain-http",
        action="store_true",
        default=None,
        help="send the token over plain http:// to a coordinator on another machine (default: "
        "refused; use https://)",
    )
    cli.add_argument(
        "--worker-env-passthrough",
        metavar="NAME,NAME",
        help="variables of the agent's environment that workers get too (default: none; "
        "workers always get PATH, LANG and LC_*)",
    )
    cli.add_argument(
        "--advertise-address",
        help="the IP address other machines reach this one at (default: the source address of "
        "the route to the coordinator)",
    )


def _serve_flags(cli: argparse.ArgumentParser) -> None:
    cli.add_argument("--host", help=f"the local API's address (default: {DEFAULT_HOST})")
    cli.add_argument(
        "--port", help=f"the local API's port; 0 picks a free one (default: {DEFAULT_PORT})"
    )
    cli.add_argument("--scan-seconds", help=f"seconds between scans (default: {SCAN_SECONDS:g})")
    cli.add_argument(
        "--udev-source",
        help="udev (default), or kernel: in a container that sees the host's kernel events "
        "but not its udevd",
    )


DESCRIPTIONS = {
    "run": "Report this machine to the coordinator and run the workers it assigns.",
    "inspect": "Print this machine's report once, as a table or --json.",
    "serve": "Scan continuously and serve the local API.",
}


def parser(command: str = "run") -> argparse.ArgumentParser:
    """The command's flags: the machine's for every command, then its own."""
    cli = argparse.ArgumentParser(
        prog="astraeus-agent" if command == "run" else f"astraeus-agent {command}",
        description=DESCRIPTIONS[command],
        epilog="Every setting can also be set as ASTRAEUS_<SETTING> (e.g. ASTRAEUS_BACKEND) "
        "or as a key of the --config TOML file; the command line wins, then the variable.",
    )
    _machine_flags(cli)
    if command == "run":
        _run_flags(cli)
    elif command == "serve":
        _serve_flags(cli)
    else:
        cli.add_argument("--json", action="store_true", help="print the report as JSON")
    return cli


def load_settings(
    argv: Sequence[str], environ: Mapping[str, str], command: str = "run"
) -> Settings:
    """`run`'s settings; SettingsError names what is wrong."""
    settings, _args = load_command(command, argv, environ)
    assert isinstance(settings, Settings)  # noqa: S101 - the run schema builds Settings
    return settings


def load_command(
    command: str, argv: Sequence[str], environ: Mapping[str, str]
) -> tuple[MachineSettings, argparse.Namespace]:
    """The command's settings from its schema, and its parsed arguments (for flags that are
    not settings, such as `inspect --json`)."""
    kind, schema = SCHEMAS[command]
    args = parser(command).parse_args(list(argv))
    config = args.config or environ.get("ASTRAEUS_CONFIG")
    values = gather(
        schema, config=Path(config) if config else None, environ=environ, flags=vars(args)
    )
    if command == "run":
        _require(values)
    values.setdefault("state_dir", default_state_dir(environ))
    _unique_drives(values.get("drives", ()) + values.get("network_drives", ()))
    return kind(**values), args


def _require(values: Mapping[str, Any]) -> None:
    for key in ("coordinator", "token_file"):
        if key not in values:
            flag = key.replace("_", "-")
            raise SettingsError(f"--{flag} is required (or ASTRAEUS_{key.upper()})")


def _advertise(raw: Any) -> str:
    """An IP address, or empty for the route's source address."""
    return _address(str(raw)) if str(raw).strip() else ""


def _address(value: str) -> str:
    try:
        return str(ipaddress.ip_address(value.strip()))
    except ValueError:
        raise SettingsError(
            f"advertise_address: {value!r} is not an IP address, e.g. 10.0.0.5"
        ) from None


def health_policy(table: Any) -> HealthPolicy:
    """`[health]` → HealthPolicy; each key is a HealthPolicy field, each value a number ≥ 0 (a
    whole one for counts, more than 0 for the window)."""
    if not isinstance(table, dict):
        raise SettingsError(f"health: {table!r} is not a table of thresholds")
    known = {f.name: f for f in fields(HealthPolicy)}
    values: dict[str, float | int] = {}
    for key, value in table.items():
        if key not in known:
            raise SettingsError(f"health.{key}: not a threshold; known: {', '.join(known)}")
        whole = known[key].type in (int, "int")
        number_ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not number_ok or value < 0 or (whole and value != int(value)):
            kind = "a whole number ≥ 0" if whole else "a number ≥ 0"
            raise SettingsError(f"health.{key}: {value!r} is not {kind}")
        values[key] = int(value) if whole else float(value)
    if values.get("window_seconds", 1) <= 0:
        raise SettingsError("health.window_seconds: must be more than 0")
    return HealthPolicy(**values)  # type: ignore[arg-type]


def parse_label(pair: str) -> tuple[str, str]:
    """`KEY=VALUE` → (KEY, VALUE); a ValueError names the pair otherwise."""
    key, sep, value = pair.partition("=")
    if not sep or not key:
        raise ValueError(f"--label {pair!r} is not KEY=VALUE")
    return key, value


def _labels(value: Any) -> tuple[tuple[str, str], ...]:
    """Labels from `--label K=V` (a list), `ASTRAEUS_LABELS=k=v,k2=v2` or a TOML `[labels]`."""
    if isinstance(value, str):
        value = [part for part in value.split(",") if part.strip()]
    if isinstance(value, dict):
        return tuple(sorted((str(key), str(item)) for key, item in value.items()))
    if not isinstance(value, list | tuple):
        raise SettingsError(f"labels: {value!r} is not a table of KEY = VALUE")
    try:
        return tuple(sorted(parse_label(str(item)) for item in value))
    except ValueError as error:
        raise SettingsError(str(error)) from None


DRIVE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


def _drives(key: str, value: Any) -> tuple[tuple[str, str], ...]:
    """Drives from `--drive NAME=PATH` (a list), `ASTRAEUS_DRIVES=a=/x,b=/y` or a TOML table;
    each name a drive name, each path absolute."""
    if isinstance(value, str):
        value = [part for part in value.split(",") if part.strip()]
    if isinstance(value, dict):
        pairs = [(str(name), str(path)) for name, path in value.items()]
    elif isinstance(value, list | tuple):
        pairs = []
        for item in value:
            name, sep, path = str(item).partition("=")
            if not sep:
                raise SettingsError(f"{key}: {item!r} is not NAME=PATH")
            pairs.append((name.strip(), path.strip()))
    else:
        raise SettingsError(f"{key}: {value!r} is not a table of NAME = PATH")
    for name, path in pairs:
        if not DRIVE_NAME.match(name):
            raise SettingsError(
                f"{key}: drive name {name!r}: use letters, digits, '.', '_' and '-', at most 63"
            )
        if not path.startswith("/"):
            raise SettingsError(f"{key}: drive {name}: path {path!r} is not absolute")
        if "," in path:
            # A container runtime's --mount reads commas as the start of its next option.
            raise SettingsError(
                f"{key}: drive {name}: path {path!r} has a comma; mount it elsewhere"
            )
    return tuple(sorted(pairs))


def _unique_drives(pairs: tuple[tuple[str, str], ...]) -> None:
    seen: set[str] = set()
    for name, _path in pairs:
        if name in seen:
            raise SettingsError(f"drives: {name} is configured more than once; name it once")
        seen.add(name)


STATE_NAME = "astraeus-agent"
"""The unit's `StateDirectory=`: `/var/lib/astraeus-agent`."""
LEGACY_ROOT_STATE = Path("/var/lib/astraeus/agent")
"""The root default before the scheme was one (inside the coordinator's directory): still used
where it exists and the new one does not."""


def default_state_dir(environ: Mapping[str, str], *, root: bool | None = None) -> Path:
    """systemd's StateDirectory=; else as root `/var/lib/astraeus-agent`, the unit's; else
    the user's XDG state directory (`~/.local/state/astraeus-agent`)."""
    as_root = os.geteuid() == 0 if root is None else root
    base = environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    legacy = LEGACY_ROOT_STATE if as_root else None
    return shared_state_dir(STATE_NAME, environ, root=as_root, user_base=Path(base), legacy=legacy)


def read_token(path: Path) -> str:
    """The agent token: the file's first line, without surrounding white space."""
    try:
        token = path.read_text().strip()
    except OSError as error:
        raise SettingsError(f"token_file: cannot read {path}: {error.strerror}") from None
    if not token:
        raise SettingsError(f"token_file: {path} is empty")
    return token
