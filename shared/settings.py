"""How both programs read their settings: one rule set, one order of sources.

Each program declares its schema: for each key, a `Rule` that turns a raw value (a flag's text,
a variable's text, or a TOML value) into the setting, or raises `ValueError` saying what it is
not. `gather` reads the sources in order, defaults, then the TOML file, then `ASTRAEUS_<KEY>`
variables, then flags, each later one winning, and names the source of any bad value:
`--stop-grace-seconds: 'soon' is not a number of seconds more than 0`,
`ASTRAEUS_DOWN_AFTER_SECONDS: ...`, `config /etc/astraeus/agent.toml: labels: ...`."""

from __future__ import annotations

import grp
import logging
import os
import pwd
import stat
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENV_PREFIX = "ASTRAEUS_"
TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


class SettingsError(ValueError):
    """A setting is missing or wrong; the text names it, where it came from, and what it takes."""


Parse = Callable[[Any], Any]


@dataclass(frozen=True)
class Rule:
    """How one key's raw value becomes its setting."""

    parse: Parse


def seconds(*, zero: bool = False) -> Rule:
    """A duration in seconds: more than 0, or 0 too where 0 means "none" (`zero`)."""
    what = "a number of seconds, 0 or more" if zero else "a number of seconds more than 0"

    def parse(raw: Any) -> float:
        value = _number(raw, what)
        if value < 0 or (value == 0 and not zero):
            raise ValueError(f"{raw!r} is not {what}")
        return value

    return Rule(parse)


def whole(*, minimum: int = 0) -> Rule:
    """A whole number, at least `minimum` (a count or a size in bytes)."""
    what = f"a whole number, {minimum} or more"

    def parse(raw: Any) -> int:
        value = _number(raw, what)
        if value != int(value) or value < minimum:
            raise ValueError(f"{raw!r} is not {what}")
        return int(value)

    return Rule(parse)


def _number(raw: Any, what: str) -> float:
    if isinstance(raw, bool):
        raise ValueError(f"{raw!r} is not {what}")
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"{raw!r} is not {what}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"{raw!r} is not {what}")
    return value


def _flag(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text not in TRUE + FALSE:
        raise ValueError(f"{raw!r} is not true or false (1, yes, on / 0, no, off)")
    return text in TRUE


def _path(raw: Any) -> Path:
    if not isinstance(raw, str | Path) or not str(raw):
        raise ValueError(f"{raw!r} is not a path")
    return Path(raw)


def _text(raw: Any) -> str:
    if not isinstance(raw, str | int) or isinstance(raw, bool):
        raise ValueError(f"{raw!r} is not text")
    return str(raw)


FLAG = Rule(_flag)
"""true or false: 1, true, yes, on or 0, false, no, off (and TOML's booleans)."""
PATH = Rule(_path)
TEXT = Rule(_text)


def read_toml(path: Path, known: Mapping[str, Rule]) -> dict[str, Any]:
    """The file's table; an unreadable file, bad TOML or an unknown key is a SettingsError."""
    try:
        data = tomllib.loads(path.read_text())
    except PermissionError as error:
        raise SettingsError(f"config {path}: {error.strerror}: {cannot_read(path)}") from None
    except OSError as error:
        raise SettingsError(f"config {path}: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise SettingsError(f"config {path}: not valid TOML: {error}") from None
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise SettingsError(
            f"config {path}: unknown setting {unknown[0]!r}; known: {', '.join(sorted(known))}"
        )
    return data


def flag_name(key: str) -> str:
    return "--" + key.replace("_", "-")


def gather(
    schema: Mapping[str, Rule],
    *,
    config: Path | None,
    environ: Mapping[str, str],
    flags: Mapping[str, Any],
) -> dict[str, Any]:
    """Each key given by some source, parsed by its rule; later sources win: the TOML file,
    then `ASTRAEUS_<KEY>` (an empty variable counts as unset), then flags (None is unset)."""
    found: dict[str, tuple[str, Any]] = {}
    if config is not None:
        for key, raw in read_toml(config, schema).items():
            found[key] = (f"config {config}: {key}", raw)
    for key in schema:
        raw = environ.get(ENV_PREFIX + key.upper())
        if raw:
            found[key] = (ENV_PREFIX + key.upper(), raw)
    for key, raw in flags.items():
        if key in schema and raw is not None:
            found[key] = (flag_name(key), raw)
    values = {}
    for key, (source, raw) in found.items():
        try:
            values[key] = schema[key].parse(raw)
        except SettingsError:
            raise  # a table's rule names the entry itself (`health.window_seconds: ...`)
        except ValueError as error:
            raise SettingsError(f"{source}: {error}") from None
    return values


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _group(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def cannot_read(path: Path) -> str:
    """Who was refused and what to do. A service runs as its own user (the coordinator's unit
    as a dynamic one), and a file written under an operator's `umask 077` is root's alone: the
    words name the user that must read it and the command that lets it."""
    uid = os.geteuid()
    try:
        info = path.stat()
    except OSError:
        facts = "a folder above it is closed to that user"
    else:
        mode = stat.S_IMODE(info.st_mode)
        facts = f"it is mode {mode:04o}, owned by {_user(info.st_uid)}:{_group(info.st_gid)}"
    return (
        f"this program runs as user {_user(uid)} (uid {uid}), which may not read it ({facts}); "
        f"let that user read it, e.g. chmod 0644 {path} (a config holds no secret; "
        "docs/operator.md §3)"
    )


SYSTEM_STATE = Path("/var/lib")
"""Where a program run as root keeps its state: `/var/lib/<the unit's StateDirectory=>`."""


def default_state_dir(
    name: str,
    environ: Mapping[str, str],
    *,
    root: bool,
    user_base: Path,
    legacy: Path | None = None,
) -> Path:
    """One scheme for both programs (docs/operator.md, *State directories*): systemd's
    `$STATE_DIRECTORY`; else, as root, `/var/lib/<name>`, the unit's own directory, so a program
    started by hand finds what its unit keeps; else `<user_base>/<name>`, the user's XDG
    directory. `legacy`, an older default, is kept where it exists and the new one does not,
    with a warning saying how to move, so an existing install keeps its state."""
    if environ.get("STATE_DIRECTORY"):
        return Path(environ["STATE_DIRECTORY"].split(":")[0])
    chosen = SYSTEM_STATE / name if root else user_base / name
    if legacy is not None and legacy != chosen and legacy.exists() and not chosen.exists():
        logging.getLogger(__name__).warning(
            "state_dir: using %s, the earlier default; the default is now %s: stop the "
            "program and `mv %s %s`, or set state_dir",
            legacy,
            chosen,
            legacy,
            chosen,
        )
        return legacy
    return chosen
