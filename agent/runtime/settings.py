"""The agent's settings: command line, then `ASTRAEUS_*` variables, then TOML, then defaults."""

import argparse
import ipaddress
import os
import re
import socket
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from astraeus.agent.health.signals import HealthPolicy

BACKEND = re.compile(r"^(auto|nvml|amdsmi|intel|none|fake:.+)$")


class SettingsError(ValueError):
    """A setting is missing or wrong; the text names it and says what is expected."""


@dataclass(frozen=True)
class Settings:
    coordinator: str
    token_file: Path
    name: str
    state_dir: Path
    backend: str = "auto"
    sysfs_root: Path = Path("/sys")
    proc_root: Path = Path("/proc")
    labels: tuple[tuple[str, str], ...] = ()
    drives: tuple[tuple[str, str], ...] = ()
    """Drives on this machine: (name, path)."""
    network_drives: tuple[tuple[str, str], ...] = ()
    """Network drives this machine reaches: (name, path where it is mounted)."""
    report_interval_seconds: float | None = None
    stop_grace_seconds: float = 30.0
    backoff_max_seconds: float = 5.0
    ca_file: Path | None = None
    """The CA that signed the coordinator's certificate; None: the system's CA store."""
    health: HealthPolicy = field(default_factory=HealthPolicy)
    """The `[health]` table of the TOML file: GPU and port health thresholds."""
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


NUMBERS = ("report_interval_seconds", "stop_grace_seconds", "backoff_max_seconds")
PATHS = ("token_file", "state_dir", "sysfs_root", "proc_root", "ca_file", "work_root")
TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")
KEYS = tuple(f.name for f in fields(Settings))


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(
        prog="astraeus-agent",
        description="Report this machine to the coordinator and run the workers it assigns.",
        epilog="Every option can also be set as ASTRAEUS_<OPTION> (e.g. ASTRAEUS_COORDINATOR) "
        "or as a key of the --config TOML file; the command line wins, then the variable.",
    )
    cli.add_argument("--coordinator", help="the coordinator's URL, e.g. https://coord:8443")
    cli.add_argument("--token-file", help="a file holding this machine's agent token")
    cli.add_argument(
        "--ca-file",
        help="PEM file of the CA that signed the coordinator's certificate "
        "(default: the system's CA store)",
    )
    cli.add_argument("--name", help="this machine's name (default: the host name)")
    cli.add_argument(
        "--backend", help="auto, nvml, amdsmi, intel, none or fake:FILE (default: auto)"
    )
    cli.add_argument("--sysfs-root", help="where sysfs is mounted (default: /sys)")
    cli.add_argument("--proc-root", help="where procfs is mounted (default: /proc)")
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
    cli.add_argument("--state-dir", help="where the agent keeps its tasks and their logs")
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
        "--advertise-address",
        help="the IP address other machines reach this one at (default: the source address of "
        "the route to the coordinator)",
    )
    cli.add_argument("--config", help="a TOML file of settings")
    return cli


def load_settings(argv: Sequence[str], environ: Mapping[str, str]) -> Settings:
    """Merge the three sources and check every value; SettingsError names what is wrong."""
    args = vars(parser().parse_args(list(argv)))
    config_path = args.pop("config") or environ.get("ASTRAEUS_CONFIG")
    merged: dict[str, Any] = _toml(Path(config_path)) if config_path else {}
    for key in KEYS:
        value = environ.get(f"ASTRAEUS_{key.upper()}")
        if value:
            merged[key] = value
    merged.update({key: value for key, value in args.items() if value is not None})
    return _settings(merged, environ)


def _toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text())
    except OSError as error:
        raise SettingsError(f"--config {path}: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise SettingsError(f"--config {path}: not valid TOML: {error}") from None
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise SettingsError(f"--config {path}: unknown setting {unknown[0]!r}; known: {KEYS}")
    return data


def _settings(merged: dict[str, Any], environ: Mapping[str, str]) -> Settings:
    for key in ("coordinator", "token_file"):
        if not merged.get(key):
            flag = key.replace("_", "-")
            raise SettingsError(f"--{flag} is required (or ASTRAEUS_{key.upper()})")
    if not re.match(r"^https?://[^/]+", str(merged["coordinator"])):
        raise SettingsError(f"coordinator: {merged['coordinator']!r} is not an http(s) URL")
    merged.setdefault("name", socket.gethostname())
    merged.setdefault("state_dir", default_state_dir(environ))
    if not BACKEND.match(str(merged.get("backend", "auto"))):
        raise SettingsError(
            f"backend: {merged['backend']!r}; use auto, nvml, amdsmi, intel, none or fake:FILE"
        )
    merged["labels"] = _labels(merged.get("labels") or ())
    for key in ("drives", "network_drives"):
        merged[key] = _drives(key, merged.get(key) or ())
    _unique_drives(merged["drives"] + merged["network_drives"])
    merged["health"] = health_policy(merged.get("health", {}))
    for key in NUMBERS:
        if key in merged:
            merged[key] = _positive(key, merged[key])
    if "allow_root_workers" in merged:
        merged["allow_root_workers"] = _flag("allow_root_workers", merged["allow_root_workers"])
    for key in ("worker_user", "worker_uids"):
        if key in merged:
            merged[key] = str(merged[key])
    for key in PATHS:
        if key in merged:
            merged[key] = Path(merged[key])
    if merged.get("advertise_address"):
        merged["advertise_address"] = _address(str(merged["advertise_address"]))
    return Settings(**merged)


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


def _positive(key: str, value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = -1.0
    if isinstance(value, bool) or not number > 0:
        raise SettingsError(f"{key}: {value!r} is not a positive number of seconds")
    return number


def _flag(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if str(value).strip().lower() in TRUE + FALSE:
        return str(value).strip().lower() in TRUE
    raise SettingsError(f"{key}: {value!r} is not true or false")


def default_state_dir(environ: Mapping[str, str], *, root: bool | None = None) -> Path:
    """systemd's StateDirectory= when set, /var/lib as root, else the user's XDG state dir."""
    if environ.get("STATE_DIRECTORY"):
        return Path(environ["STATE_DIRECTORY"].split(":")[0])
    if os.geteuid() == 0 if root is None else root:
        return Path("/var/lib/astraeus/agent")
    base = environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "astraeus-agent"


def read_token(path: Path) -> str:
    """The agent token: the file's first line, without surrounding white space."""
    try:
        token = path.read_text().strip()
    except OSError as error:
        raise SettingsError(f"token_file: cannot read {path}: {error.strerror}") from None
    if not token:
        raise SettingsError(f"token_file: {path} is empty")
    return token
